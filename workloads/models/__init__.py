"""Models of the workloads. Every parameter carries a role (workloads.roles)."""
