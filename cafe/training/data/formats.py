"""The files the trainers read. SFT rows: messages (user turn with the clip and the prompt text,
assistant turn with the MPAR² target) + audio. RL rows: prompt (the user turn) + audio + what the
rewards need (question, answer, choices, caption, events). Content is always a list of parts with
the same keys so Arrow (datasets) can hold the rows."""

from __future__ import annotations

from typing import Any


def prompt_text(question: str, choices: list[str]) -> str:
    """The MPAR² prompt: the harness's "mpar2" style when available (one source of prompt text),
    else the authors' MMAR layout (question, instruction line, one choice per line)."""
    try:
        from cafe.prompts import load_template

        return load_template("mpar2").render(question, choices)
    except (ImportError, KeyError, ValueError, AttributeError):
        return "\n".join([question, "Select one option from the provided choices:", *choices])


def _user(q: dict[str, Any], clip: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "audio", "path": clip["audio"], "text": None},
            {"type": "text", "path": None, "text": prompt_text(q["question"], q["choices"])},
        ],
    }


def _events(clip: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"label": e["label"], "onset": e["onset"], "offset": e["offset"], "required": e["required"]}
        for e in clip["events"]
    ]


def sft_row(q: dict[str, Any], clip: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": q["id"],
        "messages": [
            _user(q, clip),
            {"role": "assistant", "content": [{"type": "text", "path": None, "text": q["cot"]}]},
        ],
        "audio": clip["audio"],
    }


def rl_row(q: dict[str, Any], clip: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": q["id"],
        "prompt": [_user(q, clip)],
        "audio": clip["audio"],
        "question": q["question"],
        "answer": q["answer_text"],
        "choices": list(q["choices"]),
        "dimension": q["dimension"],
        "caption": clip["caption"] or "",
        "events": _events(clip),
    }
