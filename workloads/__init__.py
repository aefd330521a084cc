"""Everything one trial runs: models, data, optimizers, parametrizations, the train loop.

Never imports `orchestrator` or `results`; trials write through `workloads.sink.TrialSink`.
"""
