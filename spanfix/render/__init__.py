"""Rendering: rich tables for people, JSON/CSV/markdown for machines. The library never prints."""
