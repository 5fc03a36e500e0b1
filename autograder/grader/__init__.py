"""The grading process: intake, sandbox, execution, gradebook and reports. It never runs student code."""
