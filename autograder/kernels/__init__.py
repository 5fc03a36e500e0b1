"""The kernel machinery: what starts, isolates, feeds and reads the kernels.

* `jupyter`: every override of jupyter_client's and ZeroMQ's internals (the
  kernel manager that starts a student's kernel, the bounded clients).
* `isolation`: the isolation layers of a student's kernel (bubblewrap, a
  user of its own, none), one module each behind one interface, and the
  choice among them.
* `cgroups`: the CPU and process bounds of a student's kernel.
* `probe`: the tests kernel's side of a call into the student's kernel
  (`client`: StudentKernel; `transports`: execute requests or a pipe;
  `wire`: the values' encoding; `messages`: the student's redacted errors).
* `testskernel`: the test kernel itself, kept from one submission to the
  next, and a submission's session in it (what autograder.grader.execute
  asks of it).
* `forkserver`: the process that forks student kernels with their
  libraries already imported.

autograder.grader uses this package; nothing here knows about nbgrader.
"""
