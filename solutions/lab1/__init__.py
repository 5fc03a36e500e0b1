"""lab1: its source, references, hints, samples and verdicts (docs/authoring.md)."""
