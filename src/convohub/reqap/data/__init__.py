"""What ReQAP derives from PerQA: persona reading, gold trees (and the oracles on them), training data per model."""
