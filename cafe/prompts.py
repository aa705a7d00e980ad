"""Inference prompt styles (SPEC §6, own wording per §8). Each style is a template file in
cafe/templates/prompts/ with ``{question}`` and ``{choices}`` placeholders, plus an optional
system prompt; the sha256 of what the model is shown (system prompt and template text) is
recorded on every prediction. A user template file replaces a style's text to replicate printed
prompts verbatim."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from cafe.records import Request, Sample
from cafe.registry import Registry

TEMPLATES_DIR = Path(__file__).parent / "templates" / "prompts"
AUTHORS_SYSTEM = "You are a helpful assistant."
#: where a template places a clip (one per clip, in order; without them the clips come first)
AUDIO_MARK = "{audio}"


@dataclass(frozen=True)
class PromptStyle:
    name: str
    template_file: str  # file name in TEMPLATES_DIR
    system: str | None = None
    description: str = ""
    #: a named variant of one of the paper's styles (not the paper's prompt; labelled so)
    variant_of: str | None = None
    #: (form, template file): another text for items of that form (Sample.meta["prompt_form"],
    #: set by the benchmark's loader: MMAU-Pro's open and instruction-following items)
    forms: tuple[tuple[str, str], ...] = ()
    #: the benchmark whose own default this style is (its official inference's input, in our
    #: words; labelled so in reports)
    benchmark: str | None = None
    #: choices rendered "A. text", one per line (the letter rule's prompts); a string is the
    #: line's own form, with {letter} and {text} ("<{letter}>: {text}", STAR-Bench's)
    lettered: bool | str = False


@dataclass(frozen=True)
class PromptTemplate:
    """A style's text as loaded: what build_request renders and what the hash identifies."""

    style: str
    text: str
    system: str | None
    source: str  # file the text came from
    #: form -> its own text (PromptStyle.forms, loaded)
    forms: tuple[tuple[str, str], ...] = ()
    lettered: bool | str = False  # choices rendered "A. text" (a string: that form)

    @property
    def hash(self) -> str:
        # The system prompt changes what the model sees, so it is part of the identity; so does
        # lettering the choices
        payload = self.text if self.system is None else f"{self.system}\n\n{self.text}"
        for form, text in self.forms:  # so is each form's text (none: the hash is unchanged)
            payload += f"\n\n[{form}]\n{text}"
        payload += "\n[choices lettered A. B. C.]" if self.lettered is True else ""
        payload += f"\n[choices lettered {self.lettered}]" if isinstance(self.lettered, str) else ""
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def choice_lines(self, choices: list[str]) -> list[str]:
        """The choices as rendered, one per line."""
        if self.lettered:
            form = self.lettered if isinstance(self.lettered, str) else "{letter}. {text}"
            return [form.format(letter=chr(ord("A") + i), text=c.strip())
                    for i, c in enumerate(choices)]  # fmt: skip
        return [c.strip() for c in choices]

    def unlettered(self, lines: list[str]) -> list[str]:
        """The choices' texts back from their rendered lines (choice_lines inverted)."""
        if not self.lettered:
            return lines
        form = self.lettered if isinstance(self.lettered, str) else "{letter}. {text}"
        heads = [form.split("{text}")[0].format(letter=chr(ord("A") + i))
                 for i in range(len(lines))]  # fmt: skip
        pairs = zip(heads, lines, strict=True)
        return [ln[len(h) :] if ln.startswith(h) else ln for h, ln in pairs]

    def render(
        self, question: str, choices: list[str], instruction: str | None = None,
        form: str | None = None,
    ) -> str:  # fmt: skip
        """The text for one item: its form's template (the main one by default); ``{question}``,
        ``{choices}`` (one a line, lettered "A. x" where the style says so) and ``{instruction}``
        (the item's text as its benchmark's official inference gives it: SAKURA's instruction
        with its inline options; for an item without one, the question with its options written
        the same way, "(a) x (b) y")."""
        text = dict(self.forms).get(form or "", self.text)
        if instruction is None:
            instruction = inline_instruction(question, choices)
        body, lines = text.rstrip("\n"), "\n".join(self.choice_lines(choices))
        return fill(body, instruction=instruction.strip(), question=question.strip(), choices=lines)


def inline_instruction(question: str, choices: list[str]) -> str:
    """The question with its options written inline, "(a) x (b) y", as SAKURA writes them."""
    inline = " ".join(f"({chr(ord('a') + i)}) {c.strip()}" for i, c in enumerate(choices))
    return f"{question.strip()} {inline}" if inline else question


PROMPT_STYLES: Registry[PromptStyle] = Registry("prompt style", base=PromptStyle)

for _style in (
    PromptStyle("lalm", "lalm.txt", description="answer first, then a 'Reasoning:' line"),
    PromptStyle("larm", "larm.txt", description="select one option (reasoning models)"),
    PromptStyle("mpar2", "mpar2.txt", description="LARM text; the model emits MPAR² tags"),
    PromptStyle("rl-implicit", "rl-implicit.txt", description="answer inside <ANSWER></ANSWER>"),
    PromptStyle("rl-explicit", "rl-explicit.txt", description="<THINK> then <ANSWER>"),
    # the paper's prompts above; these variants add that the answer must be the option's text,
    # which steers outputs towards the official string match (not the paper's protocol)
    PromptStyle("lalm-verbatim", "lalm-verbatim.txt", None,
                "lalm, asking for the option written exactly as listed", "lalm"),
    PromptStyle("rl-implicit-verbatim", "rl-implicit-verbatim.txt", None,
                "rl-implicit, asking for the option's text", "rl-implicit"),
    PromptStyle("rl-explicit-verbatim", "rl-explicit-verbatim.txt", None,
                "rl-explicit, asking for the option's text", "rl-explicit"),
    PromptStyle("authors-mmar", "authors-mmar.txt", AUTHORS_SYSTEM, "authors' MMAR eval text"),
    PromptStyle("authors-mmau", "authors-mmau.txt", AUTHORS_SYSTEM, "authors' MMAU eval text"),
    # benchmarks' own defaults (Benchmark.default_prompt_style): their official input, in our
    # words
    PromptStyle("sakura", "sakura.txt", None, "SAKURA's instruction with its inline options, "
                "as is", benchmark="sakura"),
    PromptStyle("mmau-pro", "mmau-pro.txt", None, "MMAU-Pro per category: the question and its "
                "choices; open questions answered in free text; instruction-following items "
                "given their instruction as is", benchmark="mmau-pro",
                forms=(("open", "mmau-pro-open.txt"), ("instruction", "mmau-pro-instruction.txt"))),
    PromptStyle("mmsu-letter", "mmsu-letter.txt", None,
                "lettered options, reply with the letter only (MMSU's inference)",
                benchmark="mmsu", lettered=True),
    PromptStyle("airbench-letter", "airbench-letter.txt", None,
                "lettered options, reply with the letter only (AIR-Bench's inference)",
                benchmark="airbench", lettered=True),
    PromptStyle("bigbenchaudio", "bigbenchaudio.txt", None, "the spoken question, one line "
                "asking for its answer (options inline, where an item has any)",
                benchmark="bigbenchaudio"),
    PromptStyle("voicebench", "voicebench.txt", None,
                "the spoken instruction alone, no text (VoiceBench's inference)",
                benchmark="voicebench"),
    PromptStyle("starbench", "starbench.txt", None, "the question, then '<A>: option' lines; "
                "temporal items: the text, then each clip after 'clip N:' (STAR-Bench's input)",
                benchmark="starbench", forms=(("temporal", "starbench-temporal.txt"),),
                lettered="<{letter}>: {text}"),
):  # fmt: skip
    PROMPT_STYLES.add(_style.name, _style)


def style_label(name: str | None) -> str:
    """A run's prompt style as reports show it: a variant says it is not the paper's prompt."""
    if not name or name not in PROMPT_STYLES:
        return str(name)
    style = PROMPT_STYLES.get(name)
    if style.benchmark:
        return f"{name} ({style.benchmark}'s own prompt, not the paper's)"
    base = style.variant_of
    return f"{name} (variant of {base}, not the paper's prompt)" if base else name


def load_template(style_name: str, template_file: str | Path | None = None) -> PromptTemplate:
    """The style's own template, or ``template_file`` in its place (keeping the style's system
    prompt, so `--prompt-style authors-mmar --prompt-template mine.txt` works as expected)."""
    style = PROMPT_STYLES.get(style_name)
    path = Path(template_file) if template_file is not None else TEMPLATES_DIR / style.template_file
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise FileNotFoundError(f"{path}: cannot read prompt template ({e.strerror})") from None
    if "{question}" not in text and "{instruction}" not in text:
        raise ValueError(f"{path}: a prompt template needs a {{question}} placeholder")
    # a user's template replaces the style's text for every item (its forms too)
    forms = () if template_file is not None else tuple(
        (form, (TEMPLATES_DIR / name).read_text(encoding="utf-8")) for form, name in style.forms
    )  # fmt: skip
    return PromptTemplate(style=style.name, text=text, system=style.system, source=str(path),
                          forms=forms, lettered=style.lettered)  # fmt: skip


def build_messages(template: PromptTemplate, sample: Sample) -> list[dict[str, Any]]:
    """Optional system message, then one user message: audio part(s) first, then the text; a
    text with one ``{audio}`` mark per clip puts each clip at its mark instead."""
    messages: list[dict[str, Any]] = []
    if template.system is not None:
        messages.append({"role": "system", "content": template.system})
    parts: list[dict[str, Any]] = [{"type": "audio", "path": p} for p in sample.audio]
    text = template.render(sample.question, sample.choices, sample.meta.get("instruction"),
                           sample.meta.get("prompt_form"))  # fmt: skip
    pieces = text.split(AUDIO_MARK)
    if len(pieces) > 1 and len(pieces) == len(parts) + 1:  # the template places each clip
        clips, parts = parts, [{"type": "text", "text": pieces[0]}]
        for clip, piece in zip(clips, pieces[1:], strict=True):
            parts += [clip, *([{"type": "text", "text": piece}] if piece else [])]
    else:
        parts.append({"type": "text", "text": text})
    messages.append({"role": "user", "content": parts})
    return messages


def build_request(
    sample: Sample,
    style_name: str,
    run_index: int,
    seed: int,
    generation: dict[str, Any],
    template: PromptTemplate | str | Path | None = None,
) -> Request:
    """One Request for one (item, run). ``template`` is a loaded PromptTemplate or a file path
    overriding the style's text; load it once per run and pass it in when building many."""
    if not isinstance(template, PromptTemplate):
        template = load_template(style_name, template)
    return Request(
        sample_id=sample.id,
        run_index=run_index,
        messages=build_messages(template, sample),
        audio=list(sample.audio),
        generation=dict(generation),
        seed=seed,
        prompt_style=template.style,
        template_hash=template.hash,
    )


def fill(text: str, **fields: str) -> str:
    """``{name}`` replaced by its field, in order; other braces (a template's JSON example) are
    left alone: str.replace, not str.format, so templates need no escaping."""
    for name, value in fields.items():
        text = text.replace("{" + name + "}", value)
    return text


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def text_template(name: str, path: str | Path | None = None) -> tuple[str, str]:
    """(text, sha256) of a user template file, or of the judges' packaged
    ``cafe/judge/templates/<name>.txt`` (judge, caption and captioner prompts)."""
    if path is not None:
        text = Path(path).read_text(encoding="utf-8")
    else:
        folder = resources.files("cafe.judge").joinpath("templates")
        text = folder.joinpath(f"{name}.txt").read_text("utf-8")
    return text, sha256_text(text)
