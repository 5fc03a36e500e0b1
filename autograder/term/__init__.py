"""The instructor's term around grading: roster, deadlines, overrides, LMS export, similarity.

Grading (autograder.grader) turns submissions into results; this package
turns a lab's results into the class's gradebook of record and the files an
LMS takes back:

- model.py: the plain records shared by the steps (an enrolled `Student`,
  the `Identity` a submission's path and metadata give, a `ClassRow` of the
  final gradebook, written to OUT/class.json);
- roster.py: the class list an LMS exports (Canvas, Moodle, a plain CSV),
  and which enrolled student a submission belongs to;
- late.py: due dates, extensions and the late policy of course.toml, and
  the submission times an LMS download carries;
- overrides.py: an instructor's manual scores and notes per exercise;
- similarity/: answer cells compared pairwise (copydetect's winnowing),
  flagged for a person to judge;
- export/: grades and feedback in the files Canvas and Moodle import.

None of it changes what the hidden tests found: OUT/results/ keeps the
tests' scores, and every step here is applied again, from the files the
instructor keeps, each time the reports are written.
"""
