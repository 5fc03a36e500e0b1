"""The student repository and what keeps the instructor's side out of it.

- repository: `python -m autograder publish DEST` writes the student
  repository (the labs' notebooks, labkit, README, licence) and refuses it
  when the scanner finds anything of the instructor's in it;
- leaks: the scanner: solutions, hidden tests, references, stand-ins and
  answers, compared as Python tokens (release and labkit's wheel use it too);
- decode: every text a file holds (text encodings, archives, notebooks, data
  formats), which the scanner reads;
- encoded: the encodings found inside a text (base64, hex, base85, rot13,
  reversed text), which decode undoes.
"""
