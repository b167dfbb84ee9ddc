"""spanfix: relabel and measure SGLang speculative-decoding step spans in captured traces."""

__version__ = "0.1.0"
