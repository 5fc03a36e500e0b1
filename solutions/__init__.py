"""The labs, one folder each (docs/authoring.md); a package so that pytest collects each lab's own tests."""
