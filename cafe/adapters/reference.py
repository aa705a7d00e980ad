"""The reference listener: a signal-processing "model" that really listens. It decodes the
request's audio, detects events (cafe.adapters.listening), reads the question and choices from the
request's prompt text, reasons over what it heard and writes MPAR²-format output. It never sees
the answer or the ground-truth events, only the Request, so shuffling audio across items drops it
to chance.

How it reads a prompt (any prompt style): the user text's lines; the question is the first line
with a "?"; the choices are either lettered lines ("(A) …", "A. …", "A) …") or the lines after
the question that do not look like instructions (end with ":", hold a "<tag>", start with an
instruction verb, or run past 14 words)."""

from __future__ import annotations

import functools
import re
import time
from typing import Any

from cafe import synth_vocabulary as V
from cafe.adapters.base import Adapter
from cafe.adapters.listening import Detected, listen
from cafe.records import Completion, InputError, Request

_LETTERED = re.compile(r"^\s*(?:\(([A-Za-z])\)|([A-Za-z])[.):])\s+(.*\S)\s*$")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_INSTRUCTION_START = (
    "select",
    "choose",
    "output",
    "answer",
    "please",
    "put",
    "think",
    "respond",
    "reply",
    "give",
    "provide",
    "format",
    "reasoning",
    "first",
    "then",
    "your",
    "you",
)
_WINDOW = re.compile(r"between\s+(\d+(?:\.\d+)?)\s*s?\s+and\s+(\d+(?:\.\d+)?)\s*s")
FAST_IOI_S = 0.45  # median inter-onset interval below this is "fast"
REGULAR_TOL = 0.07  # an interval within 7 % of a whole number of beats is on the grid


# --------------------------------------------------------------------------- reading the prompt


def _content_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [p for p in content or [] if isinstance(p, dict)]


def prompt_text(request: Request) -> str:
    """All user-visible text of the request (system prompts excluded)."""
    texts = []
    for m in request.messages:
        if m.get("role") == "system":
            continue
        texts += [p.get("text", "") for p in _content_parts(m) if p.get("type") == "text"]
    return "\n".join(texts)


def audio_path(request: Request) -> str | None:
    for m in request.messages:
        for p in _content_parts(m):
            if p.get("type") in ("audio", "input_audio", "audio_url"):
                for key in ("path", "audio", "url"):
                    if isinstance(p.get(key), str):
                        return p[key]
    return request.audio[0] if request.audio else None


def _is_instruction(line: str) -> bool:
    low = line.lower()
    return (
        line.endswith(":")
        or "<" in line
        or low.split(" ", 1)[0].strip(",.") in _INSTRUCTION_START
        or len(line.split()) > 14
    )


def read_question_and_choices(text: str) -> tuple[str, list[str]]:
    """(question, choices) from a prompt's text; see the module docstring for the rules."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    lettered = [m for m in (_LETTERED.match(ln) for ln in lines) if m]
    q_idx = next((i for i, ln in enumerate(lines) if "?" in ln), 0)
    question = lines[q_idx] if lines else ""
    if len(lettered) >= 2:
        return question, [m.group(3) for m in lettered]
    after = [_BULLET.sub("", ln) for ln in lines[q_idx + 1 :]]
    return question, [ln for ln in after if not _is_instruction(ln)]


def split_rendered(template_text: str, rendered: str) -> tuple[str, list[str]] | None:
    """(question, choices) of a prompt rendered from ``template_text`` (cafe.prompts renders the
    choices one per line between the template's literal parts), or None when it does not fit.
    Exact for any choice text: "first speaker …", "1. …", long options."""
    body = template_text.rstrip("\n")
    if body.count("{question}") != 1 or body.count("{choices}") != 1:
        return None
    qi, ci = body.index("{question}"), body.index("{choices}")
    if qi > ci:
        return None
    a, b, c = body[:qi], body[qi + len("{question}") : ci], body[ci + len("{choices}") :]
    if not rendered.startswith(a) or not rendered.endswith(c) or len(rendered) < len(a) + len(c):
        return None
    mid = rendered[len(a) : len(rendered) - len(c)]
    j = mid.find(b) if b else -1
    if j < 0:
        return None
    block = mid[j + len(b) :]
    return mid[:j], block.split("\n") if block else []


@functools.lru_cache(maxsize=64)
def _packaged(style: str) -> Any:
    from cafe.prompts import load_template

    try:
        return load_template(style)
    except (KeyError, ValueError, OSError):
        return None


def request_choices(request: Request) -> tuple[str, list[str]]:
    """(question, choices) of a request: exactly, through its prompt style's own template when
    the request was rendered from it (same hash); else read from the text by rule."""
    text = prompt_text(request)
    template = _packaged(request.prompt_style)
    if template is not None and template.hash == request.template_hash:
        for body in (*(t for _, t in template.forms), template.text):  # a clip mark: a join
            parsed = split_rendered(body.rstrip("\n").replace("{audio}", "\n").rstrip("\n"), text)
            if parsed is not None:  # "A. dog" -> "dog"
                return parsed[0], template.unlettered(parsed[1])
    question, choices = read_question_and_choices(text)
    if not choices:  # options written inline, "... (a) dog (b) cat" (SAKURA's instruction)
        from cafe.parsing import split_options

        inline = split_options(text.strip())
        if inline is not None:
            return inline
    return question, choices


# --------------------------------------------------------------------------- reasoning


def _fmt_t(x: float) -> str:
    return f"{x:.2f}"


def _span(d: Detected) -> str:
    return f"[{_fmt_t(d.onset)}, {_fmt_t(d.offset)}]"


def _choice_for_label(choices: list[str], label: str | None) -> str | None:
    if label is None:
        return None
    for c in choices:
        if V.label_for_word(c) == label:
            return c
    return None


def _choice_by_text(choices: list[str], text: str) -> str | None:
    """The choice equal to ``text`` (case/space-insensitive), else the one sharing most words."""
    norm = " ".join(text.lower().split())
    for c in choices:
        if " ".join(c.lower().split()) == norm:
            return c
    words = set(re.findall(r"\w+", norm))
    scored = [
        (len(words & set(re.findall(r"\w+", c.lower()))), -i, c) for i, c in enumerate(choices)
    ]
    best = max(scored, default=None)
    return best[2] if best and best[0] > 0 else None


class _Reasoning:
    """Sub-question steps, review lines and the chosen option for one question."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, str]] = []
        self.evidence = ""
        self.logic = ""
        self.answer: str | None = None

    def step(self, q: str, a: str) -> None:
        self.steps.append((q, a))


def _target_events(events: list[Detected], label: str | None) -> list[Detected]:
    return [e for e in events if e.label == label]


def _count(question: str, choices: list[str], events: list[Detected], r: _Reasoning) -> None:
    label = V.label_for_word(question)
    hits = _target_events(events, label)
    r.step("Which sound does the question ask me to count?", f"the {label}")
    times = ", ".join(_fmt_t(e.onset) for e in hits) or "none"
    r.step(f"Which detected events are the {label}?", f"{len(hits)} events, starting at {times} s")
    n = len(hits)
    numbers = {c: int(m.group()) for c in choices if (m := re.search(r"\d+", c))}
    if numbers:
        r.answer = min(numbers, key=lambda c: (abs(numbers[c] - n), numbers[c]))
    r.step("How many times does it sound?", str(n))
    others = len(events) - n
    r.evidence = (
        f"each of the {n} {label} events is separated from its neighbours by silence; "
        f"{others} other event(s) are different sources and are not counted"
    )
    r.logic = f"a count of {n} selects the option {r.answer!r}"


def _pitch(question: str, choices: list[str], events: list[Detected], r: _Reasoning) -> None:
    label = V.label_for_word(question)
    cands = _target_events(events, label) or [e for e in events if e.f0 is not None]
    r.step("Which sound's pitch is asked about?", f"the {label}")
    if not cands:
        r.step(f"Where is the {label}?", "no pitched event was detected")
        r.evidence = "no pitched event stands out from the background"
        r.logic = "without a pitch track the contour cannot be derived; choosing the first option"
        r.answer = choices[0] if choices else None
        return
    target = max(cands, key=lambda e: e.duration)
    r.step(f"Where is the {label}?", f"{_span(target)} s, around {target.f0:.0f} Hz")
    r.step(
        "How does its pitch move from start to end?",
        f"from about {target.f0_start:.0f} Hz to {target.f0_end:.0f} Hz: {target.contour}",
    )
    r.answer = _choice_by_text(choices, target.contour or "flat")
    r.evidence = (
        f"the pitch track of the {label} at {_span(target)} s was measured frame by frame "
        f"and its first, middle and last quarters compared"
    )
    r.logic = f"a {target.contour} contour selects the option {r.answer!r}"


def _rhythm(question: str, choices: list[str], events: list[Detected], r: _Reasoning) -> None:
    import numpy as np

    label = V.label_for_word(question)
    pulses = _target_events(events, label)
    r.step("Which pulses carry the rhythm?", f"the {len(pulses)} {label} events")
    if len(pulses) < 3:
        pulses = max((_target_events(events, lab) for lab in V.LABELS), key=len, default=[])
    iois = np.diff([e.onset for e in pulses]) if len(pulses) >= 3 else np.array([0.6, 0.6])
    med = float(np.median(iois))
    # regular: nearly every interval is a whole multiple of the median (a pulse masked by an
    # overlapping sound doubles one interval without making the beat uneven)
    ratio = iois / max(med, 1e-6)
    whole = np.maximum(np.round(ratio), 1)
    on_grid = float(np.mean(np.abs(ratio - whole) < REGULAR_TOL))
    tempo = "fast" if med < FAST_IOI_S else "slow"
    regular = "regular" if on_grid >= 0.75 else "irregular"
    r.step(
        "How far apart are the pulses?",
        f"median interval {med:.2f} s (about {60 / max(med, 1e-3):.0f} per minute): {tempo}",
    )
    r.step(
        "Are the intervals even?",
        f"{on_grid * 100:.0f}% of the intervals fall on the beat grid: {regular}",
    )
    r.answer = _choice_by_text(choices, f"{tempo} and {regular}")
    r.evidence = f"{len(pulses)} pulse onsets were timed; intervals range {iois.min():.2f}-" + (
        f"{iois.max():.2f} s"
    )
    r.logic = f"{tempo} tempo and {regular} spacing select the option {r.answer!r}"


def _temporal(question: str, choices: list[str], events: list[Detected], r: _Reasoning) -> None:
    listed = {V.label_for_word(c): c for c in choices}
    order = [e for e in events if e.label in listed]
    seq = []
    for e in order:  # the sequence of listed sources (repeats of the same source collapse)
        if not seq or seq[-1].label != e.label:
            seq.append(e)
    r.step(
        "In what order do the listed sounds occur?",
        ", then ".join(f"{e.label} at {_fmt_t(e.onset)} s" for e in seq) or "none detected",
    )
    low = question.lower()
    pick: Detected | None = None
    if "first" in low:
        pick = seq[0] if seq else None
    elif "last" in low:
        pick = seq[-1] if seq else None
    else:
        m = re.search(r"\b(?:after|before)\b(.*)", low)
        ref_label = V.label_for_word(m.group(1) if m else low)
        ref = next((i for i, e in enumerate(seq) if e.label == ref_label), None)
        r.step(
            f"When is the {ref_label}?", _span(seq[ref]) + " s" if ref is not None else "unheard"
        )
        if ref is not None:
            j = ref + 1 if "after" in low else ref - 1
            pick = seq[j] if 0 <= j < len(seq) else None
    r.step("Which listed sound does the question point to?", pick.label if pick else "none")
    r.answer = listed.get(pick.label) if pick else None
    if r.answer is None and choices:
        heard = {e.label for e in events}
        r.answer = next((c for c in choices if V.label_for_word(c) not in heard), choices[0])
    r.evidence = "onset times of every listed source were read from the energy envelope"
    r.logic = f"the order above selects the option {r.answer!r}"


def _timbre(question: str, choices: list[str], events: list[Detected], r: _Reasoning) -> None:
    m = _WINDOW.search(question.lower())
    if m and events:
        a, b = float(m.group(1)), float(m.group(2))

        def overlap(e: Detected) -> float:
            return min(b, e.offset) - max(a, e.onset)

        target = max(events, key=overlap)
        r.step(f"What is heard between {a:.1f} s and {b:.1f} s?", f"an event at {_span(target)} s")
    elif events:
        target = max(events, key=lambda e: e.duration * 10 ** (e.level_db / 10))
        r.step("Which sound dominates the clip?", f"the event at {_span(target)} s")
    else:
        target = None
    feats = target.features if target else {}
    r.step(
        "What is its spectral character?",
        (
            f"flatness {feats.get('flatness', 0):.2f}, impulsiveness (kurtosis) "
            f"{feats.get('kurtosis', 0):.1f}, third harmonic {feats.get('harm3_db', 0):.0f} dB "
            f"re the fundamental, pitch spread {feats.get('pitch_spread', 0):.2f} octaves"
        )
        if target
        else "no event detected",
    )
    label = target.label if target else None
    r.step("Which source has that character?", label or "unknown")
    r.answer = _choice_for_label(choices, label)
    r.evidence = "the event's spectrum and envelope were measured inside its own time span"
    r.logic = f"a {label} selects the option {r.answer!r}"


def classify_question(question: str) -> str:
    low = question.lower()
    if "how many" in low or "count" in low:
        return "counting"
    if "pitch" in low:
        return "pitch"
    if "rhythm" in low or "tempo" in low or "pace" in low:
        return "rhythm"
    if any(w in re.findall(r"\w+", low) for w in ("first", "last", "after", "before")):
        return "temporal"
    return "timbre"


SOLVERS = {
    "counting": _count,
    "pitch": _pitch,
    "rhythm": _rhythm,
    "temporal": _temporal,
    "timbre": _timbre,
}


def answer(question: str, choices: list[str], events: list[Detected]) -> str:
    """The MPAR²-format completion for one question given the detected events."""
    r = _Reasoning()
    SOLVERS[classify_question(question)](question, choices, events, r)
    if r.answer is None and choices:  # nothing matched: commit to the first option, say so
        r.answer = choices[0]
        r.logic += "; no option matched what was heard, so the first option is given"
    perception = (
        "\n".join(f"{i}. {_span(e)}: {e.describe()}" for i, e in enumerate(events, 1))
        or "1. [0.00, 0.00]: no sound event above the background"
    )
    reasoning = "\n".join(
        f"{i}. Sub-question: {q} Answer: {a}" for i, (q, a) in enumerate(r.steps, 1)
    )
    review = f"1. Evidence check: {r.evidence}. 2. Logic check: {r.logic}."
    return (
        f"<thinking><perception>{perception}</perception>\n"
        f"<reasoning>{reasoning}</reasoning>\n"
        f"<review>{review}</review></thinking><answer>{r.answer or ''}</answer>"
    )


def budget_events(events: list[Detected], budget: int) -> list[Detected]:
    """Budget forcing, the reference's way: the events whose perception lines fit in ``budget``
    words (in onset order), so a smaller budget perceives fewer events and answers from them."""
    kept: list[Detected] = []
    used = 0
    for i, e in enumerate(events, 1):
        used += len(f"{i}. {_span(e)}: {e.describe()}".split())
        if used > budget:
            break
        kept.append(e)
    return kept


class ReferenceAdapter(Adapter):
    """Signal-processing listener for the synth benchmark (engine "cpu", style "mpar2")."""

    default_batch_size = 32
    #: generation "reasoning_budget" N (cafe.robustness.budgets): perception cut at N words
    budget_method = "budget forcing (reference: perception cut at N words, answer forced)"

    def generate(self, requests: list[Request]) -> list[Completion]:
        from cafe.audio import load_audio

        out = []
        for req in requests:
            t0 = time.perf_counter()
            try:
                path = audio_path(req)
                # no audio (the text-only listening control): it hears nothing, as under silence
                events = [] if path is None else listen(load_audio(path, sample_id=req.sample_id))
                if req.generation.get("reasoning_budget") is not None:
                    events = budget_events(events, int(req.generation["reasoning_budget"]))
                question, choices = request_choices(req)
                text = answer(question, choices, events)
                out.append(
                    Completion(
                        req.sample_id,
                        req.run_index,
                        text,
                        output_tokens=self.count_tokens(text),
                        latency_s=time.perf_counter() - t0,
                        backend={"engine": "cpu", "model": "reference", "events": len(events)},
                    )
                )
            except (InputError, ValueError) as e:
                out.append(
                    Completion(
                        req.sample_id,
                        req.run_index,
                        None,
                        latency_s=time.perf_counter() - t0,
                        backend={"engine": "cpu", "model": "reference"},
                        error=str(e),
                    )
                )
        return out
