"""The Parquet store (write/read), analysis, plots and the HTML report. Never imports `orchestrator`."""

from results.store import RunStore, load_curves, load_layers, load_params, load_trials

__all__ = ["RunStore", "load_curves", "load_layers", "load_params", "load_trials"]
