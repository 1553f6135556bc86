"""envguard: snapshot a known-good ML training environment, explain drift, put it back."""

__version__ = "0.1.0"
