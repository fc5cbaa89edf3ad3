"""Per-token losses (flat 1-D tensors over the trainable tokens of a batch); aggregation is separate."""
