"""What every command shares: the click classes that turn CafeError into one line, and (below)
the option decorators with the project's canonical names. Imports only click, so `cafe --help`
stays fast."""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from cafe.errors import CafeError, CafeUsageError

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def cli_errors() -> Iterator[None]:
    """CafeError -> click's one-line error (exit 2 with the usage line for CafeUsageError).
    Every command also runs with its printed lines, log records and error messages scrubbed of
    secrets (cafe.redaction): the last net under the scrubbing each writer does."""
    from cafe.redaction import ScrubbingStream, install_log_scrubbing, scrub_exception, scrub_text

    install_log_scrubbing()
    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, ScrubbingStream):  # nested command: already wrapped
        sys.stdout, sys.stderr = ScrubbingStream(sys.stdout), ScrubbingStream(sys.stderr)
    try:
        yield
    except CafeError as e:
        msg = scrub_text(str(e))
        if e.exit_code == 2:
            raise click.UsageError(msg, ctx=click.get_current_context(silent=True)) from None
        err = click.ClickException(msg)
        err.exit_code = e.exit_code
        raise err from None
    except OSError as e:  # a machine fault (full disk, read-only folder…): one line, exit 1
        from cafe.errors import os_error_line

        raise click.ClickException(scrub_text(os_error_line(e))) from None
    except Exception as e:
        raise scrub_exception(e) from e.__cause__
    finally:
        sys.stdout, sys.stderr = saved


class Command(click.Command):
    """A cafe command: project errors become one line, also when invoked without the group."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        note_deprecated(self, args)
        try:
            return super().parse_args(ctx, list(args))
        except click.NoSuchOption as e:  # suggest only what --help shows (no old spelling)
            hidden = {o for p in self.params for o in getattr(p, "old", ())}
            hidden |= {o for p in self.params if getattr(p, "hidden", False) for o in p.opts}
            kept = [o for o in (e.possibilities or []) if o not in hidden]
            if kept == list(e.possibilities or []):
                raise
            raise click.NoSuchOption(e.option_name, possibilities=kept or None, ctx=e.ctx) from None
        except click.UsageError as e:
            hint = _one_word_hint(self, args, e.message)
            if hint is None:
                raise
            raise click.UsageError(f"{e.message}: {hint}", ctx=e.ctx) from None

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        with cli_errors():
            return super().invoke(ctx)


_EXTRA = re.compile(r"unexpected extra arguments? \((.+)\)")
_LIST_HELP = re.compile(r"comma-\s*separated", re.I)


def _one_word_hint(cmd: click.Command, args: list[str], message: str) -> str | None:
    """The right form when an option's value was written as two words: ``-o temperature 0.7``
    (KEY=VALUE is one word) or ``--controls silence text-only`` (a comma-separated list)."""
    m = _EXTRA.search(message)
    if not m:
        return None
    extra = m.group(1).split()
    for i in range(2, len(args)):
        if args[i] != extra[0]:
            continue
        opt = next((p for p in cmd.params if isinstance(p, click.Option) and not p.is_flag
                    and args[i - 2] in (*p.opts, *p.secondary_opts)), None)  # fmt: skip
        if opt is None:
            continue
        name, value, rest = args[i - 2], args[i - 1], args[i : i + len(extra)]
        helptext = " ".join((opt.help or "").split())
        if "KEY=VALUE" in helptext and "=" not in value and len(rest) == 1:
            return f"{name} takes KEY=VALUE as one word: {name} {value}={rest[0]}"
        if _LIST_HELP.search(helptext):
            joined = ",".join([value, *rest])
            return f"{name} takes a comma-separated list as one word: {name} {joined}"
    return None


class Group(click.Group):
    """A cafe command group; its subcommands are cafe Commands."""

    command_class = Command

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        with cli_errors():
            return super().invoke(ctx)


Group.group_class = Group


def command(name: str | None = None, **kwargs: Any) -> Callable[[F], Command]:
    """``click.command`` making a cafe Command."""
    return click.command(name, cls=Command, **kwargs)  # type: ignore[return-value]


def group(name: str | None = None, **kwargs: Any) -> Callable[[F], Group]:
    """``click.group`` making a cafe Group (its subcommands are cafe Commands)."""
    return click.group(name, cls=Group, **kwargs)  # type: ignore[return-value]


# options -----------------------------------------------------------------------------------
class Option(click.Option):
    """An option that still accepts its old spellings (``old=("--meta",)``): hidden from --help,
    and using one prints a one-line deprecation note (Command.parse_args)."""

    def __init__(self, param_decls: list[str], *, old: tuple[str, ...] = (), **kwargs: Any):
        super().__init__([*param_decls, *old], **kwargs)
        self.old = tuple(old)

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        shown = self.opts
        self.opts = [o for o in shown if o not in self.old]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = shown


def note_deprecated(command: click.Command, args: list[str]) -> None:
    """One stderr line per old option spelling used in ``args``."""
    noted: set[str] = set()
    for arg in args:
        if arg == "--":
            break
        name = arg.split("=", 1)[0]
        for p in command.params:
            if name in getattr(p, "old", ()) and name not in noted:
                noted.add(name)
                new = next(o for o in p.opts if o not in p.old)
                click.echo(f"note: {name} is deprecated, use {new}", err=True)


def compose(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Several option decorators as one, applied so --help lists them in the order given."""

    def deco(f: F) -> F:
        for d in reversed(decorators):
            f = d(f)
        return f

    return deco


def option(*decls: str, old: tuple[str, ...] = (), **kwargs: Any) -> Callable[[F], F]:
    return click.option(*decls, cls=Option, old=old, **kwargs)


#: bounds of the numeric options: an absurd value (``--runs 1e9``, a seed numpy refuses, a
#: negative wait) is refused before anything runs, with the range in click's one line
ITEMS = click.IntRange(1, 10**8)
COUNT = click.IntRange(0, 10**8)  # ITEMS, zero allowed: --trim, --retries, --thinking-budget
RUNS = click.IntRange(1, 1000)
SEED = click.IntRange(0, 2**32 - 1)
IN_FLIGHT = click.IntRange(1, 100_000)
TOKENS = click.IntRange(1, 10**7)
STEPS = click.IntRange(1, 10**9)
SECONDS = click.FloatRange(0.1, 86_400)


def limit_option(default: int | None = None, help: str = "Only the first N items.", old=()):
    return option(
        "--limit",
        type=ITEMS,
        default=default,
        show_default=default is not None,
        help=help,
        old=old,
    )


def data_option(required: bool = False, help: str | None = None, old=(), **kwargs: Any):
    return option(
        "--data",
        required=required,
        help=help or "Benchmark metadata file or folder (default: the benchmark's own).",
        old=old,
        **kwargs,
    )


def no_progress_option(old=()):
    return option("--no-progress", is_flag=True, help="No progress bar.", old=old)


def max_new_tokens_option(default: int | None, help: str = "Token budget per answer.", old=()):
    return option(
        "--max-new-tokens",
        type=TOKENS,
        default=default,
        show_default=default is not None,
        help=help,
        old=old,
    )


def format_option(choices: Sequence[str], default: str | None, help: str):
    """--format is a file type, nothing else."""
    return option(
        "--format",
        "fmt",
        type=click.Choice(list(choices)),
        default=default,
        show_default=default is not None,
        help=help,
    )


def concurrency_option(default: int | None = None, help: str = "Model calls in flight."):
    return option(
        "--concurrency",
        type=IN_FLIGHT,
        default=default,
        show_default=default is not None,
        help=help,
    )


def judge_endpoint_option(
    help: str = "Judge server base URL; repeat to share the load over several servers.",
    dest: str = "judge_endpoints",
    old: tuple[str, ...] = (),
):
    """--judge-endpoint URL (repeatable)."""
    return option("--judge-endpoint", dest, multiple=True, help=help, old=old)


def judge_concurrency_option(
    default: int | None = None,
    help: str | None = "Judge calls in flight.",
    dest: str = "judge_concurrency",
    bound: click.IntRange = IN_FLIGHT,
    old: tuple[str, ...] = (),
):
    """--judge-concurrency N: judge calls in flight."""
    return option(
        "--judge-concurrency",
        dest,
        type=bound,
        default=default,
        show_default=default is not None,
        help=help,
        old=old,
    )


def judge_api_key_env_option(dest: str = "judge_api_key_env"):
    """--judge-api-key-env NAME: the variable holding the judge server's key."""
    return option(
        "--judge-api-key-env",
        dest,
        metavar="NAME",
        help="Variable holding the --judge-endpoint server's key [CAFE_ENDPOINT_API_KEY; "
        "OpenAI's / Google's own endpoint: OPENAI_API_KEY / GEMINI_API_KEY].",
    )


def judge_server_options(
    concurrency: int | None = None,
    endpoint_old: tuple[str, ...] = (),
    concurrency_old: tuple[str, ...] = (),
):
    """--judge-model, --judge-endpoint (repeatable), --judge-concurrency, --judge-api-key-env;
    ``*_old``: former spellings still accepted (`cafe judge --endpoint`)."""
    return compose(
        option("--judge-model", help="Model name the judge server knows."),
        judge_api_key_env_option(),
        judge_endpoint_option(old=endpoint_old),
        judge_concurrency_option(concurrency, old=concurrency_old),
    )


def template_option(help: str):
    """--template FILE: the user's own prompt template in place of the packaged one."""
    return option(
        "--template", type=click.Path(exists=True, dir_okay=False), default=None, help=help
    )


def cache_option(default_file: str | None = None):
    """--cache FILE (dest cache_path): the SQLite call cache; ``default_file``: the one under
    $CAFE_CACHE used without it, named in the help."""
    where = f" (default $CAFE_CACHE/{default_file})" if default_file else ""
    return option(
        "--cache",
        "cache_path",
        type=click.Path(dir_okay=False),
        default=None,
        help=f"SQLite call cache{where}.",
    )


def thinking_options(help: str, budget_help: str | None = None):
    """--thinking/--no-thinking and --thinking-budget N, for a judge that may think."""
    return compose(
        option("--thinking/--no-thinking", default=False, show_default=True, help=help),
        option("--thinking-budget", type=COUNT, default=None, help=budget_help),
    )


def json_option(help: str = "Print the section as JSON."):
    return option("--json", "as_json", is_flag=True, help=help)


@dataclass(frozen=True)
class ModelChoice:
    """The model a command was told to load (model_options): its name, checkpoint and extra
    cards, and the adapter options still as given (-o pairs, --endpoint, --api-key-env)."""

    name: str | None
    checkpoint: str | None
    cards: tuple[str, ...]
    pairs: tuple[str, ...]
    endpoints: tuple[str, ...]
    api_key_env: str | None

    def adapter_options(self) -> dict[str, Any]:
        """The adapter options; parsed only here, so a bad -o fails where the command asks."""
        return adapter_options(self.pairs, self.endpoints, self.api_key_env)

    def load_kwargs(self) -> dict[str, Any]:
        """``checkpoint``, ``cards`` and ``options`` as the functions loading a model take them."""
        return {
            "checkpoint": self.checkpoint,
            "cards": self.cards,
            "options": self.adapter_options(),
        }


def gathered(dest: str, make: Callable[..., Any], names: Sequence[str]) -> Callable[[F], F]:
    """The options ``names`` reach the command as one argument: ``dest`` = make(their values)."""

    def deco(f: F) -> F:
        @functools.wraps(f)
        def wrapper(**kwargs: Any) -> Any:
            kwargs[dest] = make(*[kwargs.pop(n) for n in names])
            return f(**kwargs)

        return wrapper  # type: ignore[return-value]

    return deco


def cards_option():
    return option(
        "--cards", multiple=True, type=click.Path(exists=True), help="Extra model cards YAML."
    )


def endpoint_option():
    """--endpoint URL (repeatable): a served model's server, as `cafe run` takes it."""
    return option(
        "--endpoint",
        "endpoints",
        multiple=True,
        help="Model server base URL for served models (repeat to shard the work).",
    )


def model_options(required: bool = True, default: str | None = None):
    """The options of every command that loads a model: --model, --checkpoint, --cards,
    -o/--option KEY=VALUE and --endpoint (a served model), as `cafe run` takes them; the
    command gets them as one ``model: ModelChoice``."""
    return compose(
        gathered(
            "model",
            _model_choice,
            ("model", "checkpoint", "cards", "options", "endpoints", "api_key_env", "trust_card"),
        ),  # fmt: skip
        option(
            "--model",
            required=required,
            default=default,
            show_default=default is not None,
            help="Model card name, registered adapter name, or a checkpoint folder.",
        ),
        option("--checkpoint", help="Checkpoint path or hub id overriding the card's."),
        cards_option(),
        option(
            "-o",
            "--option",
            "options",
            multiple=True,
            help="Adapter option or generation setting KEY=VALUE (repeat), e.g. -o "
            "temperature=0.7 -o top_p=0.95.",
        ),
        endpoint_option(),
        option(
            "--api-key-env",
            metavar="NAME",
            help="Variable holding the --endpoint server's key [CAFE_ENDPOINT_API_KEY; "
            "OpenAI's own URL: OPENAI_API_KEY].",
        ),
        option(
            "--trust-card",
            is_flag=True,
            help="Accept the cafe-card.yaml of the --model folder as written, even where it "
            "names an endpoint, a key variable, a paper group or another model's name (a "
            "card that came with downloaded weights may not, unconfirmed).",
        ),
    )


def _model_choice(
    model: str | None,
    checkpoint: str | None,
    cards: tuple[str, ...],
    pairs: tuple[str, ...],
    endpoints: tuple[str, ...],
    api_key_env: str | None,
    trust_card: bool,
) -> ModelChoice:
    """ModelChoice, with the --model folder's card among the user's own --cards when they
    trust it (cafe.adapters.cards.trusted_folder)."""
    if trust_card and model:
        from cafe.adapters.cards import FOLDER_CARD

        cards = (*cards, str(Path(model) / FOLDER_CARD))
    return ModelChoice(model, checkpoint, cards, pairs, endpoints, api_key_env)


def adapter_options(
    pairs: Sequence[str], endpoints: Sequence[str] = (), api_key_env: str | None = None
) -> dict[str, Any]:
    """-o KEY=VALUE pairs (values read as YAML scalars) plus --endpoint and --api-key-env, as
    adapter options."""
    import yaml

    from cafe.records import YamlBoundsError, load_yaml, yaml_problem

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CafeUsageError(f"--option {pair!r}: expected KEY=VALUE")
        try:
            out[key] = load_yaml(value, max_nodes=10_000)
        except (yaml.YAMLError, YamlBoundsError) as e:  # the parser's own text quotes the value
            _, what = yaml_problem(e)
            raise CafeUsageError(
                f"--option {key}=…: the value is not valid YAML ({what}); quote it, or write "
                "a YAML flow value such as [1, 2] or {name: value}"
            ) from None
    if endpoints:
        out["endpoints"] = list(endpoints)
    if api_key_env:
        out["api_key_env"] = api_key_env
    return out


def judge_server_kwargs(
    judge_model: str | None = None,
    judge_endpoints: Sequence[str] = (),
    judge_concurrency: int | None = None,
    judge_api_key_env: str | None = None,
    captions: str | None = None,
) -> dict[str, Any]:
    """The judge-server options (and --captions) given on the command line, as the judge
    pipeline's keyword arguments; options not given are left out, so recorded ones can fill in."""
    given = {
        "judge_model": judge_model,
        "endpoints": tuple(judge_endpoints) or None,
        "concurrency": judge_concurrency,
        "captions": captions,
        "api_key_env": judge_api_key_env,
    }
    return {k: v for k, v in given.items() if v}


# -- command-line options shared by every command that judges or captions ---------------------
@dataclass(frozen=True)
class BatchChoice:
    """How a judging command was told to send its calls (batch_click_options)."""

    on: bool
    retry: str
    poll_s: float
    no_wait: bool
    prices: str | None

    def call_kwargs(self) -> dict[str, Any]:
        """``batch``, ``prices`` and ``batch_options`` as call_plan and the judge runs take them."""
        opts = {"retry": self.retry, "poll_s": self.poll_s, "wait": not self.no_wait}
        return {"batch": self.on, "prices": self.prices, "batch_options": opts}


def batch_click_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--batch, --batch-retry, --batch-poll, --batch-no-wait, --prices; the command gets them as
    one ``batch: BatchChoice``."""
    names = ("batch", "batch_retry", "batch_poll", "batch_no_wait", "prices")
    f = gathered("batch", BatchChoice, names)(f)
    opts = [
        click.option("--batch", is_flag=True,
                     help="Send through the service's batch endpoints (about half price, up to "
                     "24 h); batch ids are kept beside the output, so a killed command resumes "
                     "by polling them, never resubmitting."),
        click.option("--batch-retry", type=click.Choice(["resubmit", "direct"]),
                     default="resubmit", show_default=True,
                     help="What failed or expired batch items get: a new batch, or a direct "
                     "call."),
        click.option("--batch-poll", type=click.FloatRange(0.01, 86_400), default=30.0,
                     show_default=True,
                     help="Seconds between the first batch status checks (grows to 5 min)."),
        click.option("--batch-no-wait", is_flag=True,
                     help="Submit (or check once) and exit; run again later to collect."),
        click.option("--prices", type=click.Path(exists=True, dir_okay=False), default=None,
                     help="Your price table (shape of cafe/clients/prices.yaml; also "
                     "$CAFE_PRICES)."),
    ]  # fmt: skip
    for opt in reversed(opts):
        f = opt(f)
    return f


def echo_costs(
    calls: dict[str, Any], selective: dict[str, Any] | None = None, err: bool = False
) -> None:
    """Print a judging command's batch counts, spend, server trouble and selective saving
    (``err``: on stderr)."""
    from cafe.clients.calls import cost_lines

    for line in cost_lines(calls, selective):
        click.echo(line, err=err)
