"""recallwatch: context-recall monitoring for the retrieval half of RAG systems, from
production logs. The public entry points are in pipeline.api; the `recallwatch` command
(pipeline.cli) and schedulers call them."""
