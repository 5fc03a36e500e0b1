"""Code sent as text to the sandboxed student kernel (glue.py); nothing here is imported by the grader."""
