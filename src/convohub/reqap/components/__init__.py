"""ReQAP's components over the engine: QUD decomposers, retrievers, extractors, the pipeline, the baselines."""
