"""relabel: the byte patches that rename step spans, and the relabelled trace written beside the input."""
