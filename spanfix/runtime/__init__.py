"""Process-level pieces every stage may use: forked children, memory limits, progress, notices."""
