"""One module per physical model: workload, compute, memory, communication, pipeline, cost, goodput."""
