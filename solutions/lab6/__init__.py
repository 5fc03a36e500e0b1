"""lab6 (being built, issue 23): its references so far; no lab.toml yet, so the kit does not list it."""
