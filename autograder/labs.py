"""The labs of the kit and the curriculum contract each one keeps.

The exercise names below are those of ../shared/CURRICULUM.md; graders and
instructors rely on them (exercises.csv, feedback, reports).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

#: The kit's checkout (solutions/, labs/, data/ live here).
KIT_ROOT = Path(os.environ.get("LABKIT_ROOT", Path(__file__).resolve().parent.parent))


@dataclass(frozen=True)
class Lab:
    """One lab: one nbgrader assignment with one notebook."""

    id: str
    notebook: str
    title: str
    exercises: tuple[str, ...]

    @property
    def source_path(self) -> Path:
        """The single source (jupytext percent) with solutions and hidden tests."""
        return KIT_ROOT / "solutions" / self.id / f"{self.notebook}.py"

    @property
    def student_path(self) -> Path:
        """The generated student notebook, committed under labs/."""
        return KIT_ROOT / "labs" / self.id / f"{self.notebook}.ipynb"

    @property
    def available(self) -> bool:
        return self.source_path.exists()


LABS: dict[str, Lab] = {
    lab.id: lab
    for lab in (
        Lab(
            "lab1",
            "lab1_attention",
            "Lab 1: attention from scratch",
            (
                "dot_scores",
                "softmax",
                "attention_pool",
                "bilinear_scores",
                "additive_scores",
                "scaled_dot_product_attention",
            ),
        ),
        Lab(
            "lab2",
            "lab2_multihead_attention",
            "Lab 2: self-attention and multi-head attention",
            ("mha_weight_shapes", "SelfAttention", "split_heads", "merge_heads",
             "MultiHeadAttention"),
        ),
        Lab(
            "lab3",
            "lab3_positional_embeddings",
            "Lab 3: positional embeddings",
            ("positional_encoding", "PositionalEmbedding", "LearnedPositionalEmbedding"),
        ),
        Lab(
            "lab4",
            "lab4_masked_decoder",
            "Lab 4: masks, encoder and masked decoder layers",
            ("causal_mask", "padding_mask", "combine_masks", "masked_softmax",
             "FeedForward", "EncoderLayer", "DecoderLayer"),
        ),
        Lab(
            "lab5",
            "lab5_transformer",
            "Lab 5: a whole Transformer",
            ("Encoder", "Decoder", "Transformer", "masked_loss", "masked_accuracy",
             "greedy_decode", "sample_with_temperature", "beam_search"),
        ),
    )
}


def get_lab(lab_id: str) -> Lab:
    """The lab called ``lab_id``, or a ValueError that lists the labs there are."""
    lab = LABS.get(lab_id)
    if lab is None:
        raise ValueError(
            f"Unknown lab {lab_id!r}. Expected one of: {', '.join(LABS)}."
        )
    if not lab.available:
        ready = ", ".join(l.id for l in LABS.values() if l.available) or "none"
        raise ValueError(
            f"{lab_id} has no source yet ({lab.source_path} is missing). "
            f"Labs with a source: {ready}."
        )
    return lab


def available_labs() -> list[Lab]:
    """The labs whose source exists, in curriculum order."""
    return [lab for lab in LABS.values() if lab.available]


def course_settings() -> dict:
    """The parsed course.toml of the kit."""
    with open(KIT_ROOT / "course.toml", "rb") as handle:
        return tomllib.load(handle)


def labkit_requirement() -> str:
    """The pinned pip requirement of the student helpers, for Colab's setup cell."""
    public = course_settings()["public"]
    return f"labkit @ git+{public['repository']}@{public['ref']}#subdirectory=student"


def colab_url(lab: Lab) -> str:
    """The 'Open in Colab' address of a lab's student notebook."""
    public = course_settings()["public"]
    repository = public["repository"].removeprefix("https://github.com/")
    return (
        f"https://colab.research.google.com/github/{repository}/blob/"
        f"{public['ref']}/labs/{lab.id}/{lab.notebook}.ipynb"
    )
