"""Spec -> trials -> Ray Tune -> store, and the `hpt` command line."""
