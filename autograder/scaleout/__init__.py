"""Grading beyond one machine, on the engines courses already run.

- gradescope.py: a lab's autograder bundle for Gradescope (grading at
  submission time, on Gradescope's machines), and what it runs there;
- slurm.py: a class graded as a Slurm array job, merged by a dependent job;
- kubernetes.py: the same as a Kubernetes indexed Job.

Each runs the kit's own `grade` (the sandbox, the two kernels, stand-ins,
repairs); only where and how many at once changes.
"""
