"""ReQAP's operator engine: parse, check and execute operator trees over an event store (no ML)."""
