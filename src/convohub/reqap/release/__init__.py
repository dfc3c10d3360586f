"""What the release trains, measures and publishes for ReQAP: one module per model, plus end-to-end evaluation."""
