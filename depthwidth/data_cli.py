"""`depthwidth data prepare CORPUS --out DIR`: a text corpus (a file, a folder, JSONL or Parquet
with a text field) tokenized into train.bin, val.bin and meta.json (depthwidth/data/prepare.py),
which a sweep's [data] names as `source = "tokens"`, `path = DIR`. Bad input: one sentence naming
the field and value, exit code 2, nothing written (docs/data.md, "Prepare a corpus").
"""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
import sys

from depthwidth.clitools import OutputError, fail, terminate_cleanly


def _check_flags(args: argparse.Namespace) -> int | None:
    """The flags, before anything is read: raises DataError; returns the vocabulary to train."""
    from depthwidth.data.base import DataError
    from depthwidth.data.prepare import DEFAULT_VOCAB, check_vocab, load_tokenizer

    if args.tokenizer is not None and not args.tokenizer.strip():
        raise DataError("--tokenizer = '' is invalid: it names no tokenizer.json.")
    if args.vocab is not None and args.tokenizer:
        raise DataError(
            f"--vocab = {args.vocab} is invalid with --tokenizer = {args.tokenizer!r}: the "
            f"tokenizer fixes the vocabulary, so give one of the two."
        )
    if not 0.0 < args.val_fraction < 1.0:
        raise DataError(f"--val-fraction = {args.val_fraction:g} is invalid: it must lie in (0, 1).")
    if args.seed < 0:
        raise DataError(f"--seed = {args.seed} is invalid: it must be >= 0.")
    if not args.field:
        raise DataError(f"--field = {args.field!r} is invalid: it must name a field.")
    if not (math.isfinite(args.sample_mb) and args.sample_mb > 0):
        raise DataError(
            f"--sample-mb = {args.sample_mb:g} is invalid: it must be a finite number of MB above 0."
        )
    vocab = None if args.tokenizer else (args.vocab if args.vocab is not None else DEFAULT_VOCAB)
    if vocab is not None:
        check_vocab(vocab)
    else:
        load_tokenizer(args.tokenizer)
    return vocab


def _say_done(args: argparse.Namespace, meta: dict) -> None:
    from depthwidth.data.prepare import MIN_VAL_TOKENS

    print(
        f"prepared {args.out}: {meta['documents']:,} documents, {meta['train']['tokens']:,} train and "
        f"{meta['val']['tokens']:,} val tokens ({meta['dtype']}), vocabulary {meta['vocab_size']:,}, "
        f"hash {meta['hash'][:16]}"
    )
    print(f'train on it with [data] source = "tokens", path = "{args.out}" (or --data tokens:{args.out})')
    if (held := meta["val"]["tokens"]) < MIN_VAL_TOKENS:
        want = args.val_fraction * MIN_VAL_TOKENS / held
        hint = (
            f"--val-fraction {want:.2g} would hold about {MIN_VAL_TOKENS:,}"
            if want < 0.5
            else "a larger --val-fraction, or a corpus of more documents, holds more out"
        )
        print(
            f"data: warning: the val split holds only {held:,} tokens, fewer than {MIN_VAL_TOKENS:,}: "
            f"a validation loss measured on so few is noisy (evaluation windows overlap and repeat "
            f"them); {hint}.",
            file=sys.stderr,
        )


def cmd_prepare(args: argparse.Namespace) -> int:
    from depthwidth.data.base import DataError
    from depthwidth.data.corpus import Corpus
    from depthwidth.data.prepare import Request, claim_out, prepare

    terminate_cleanly()
    # `kill -INT` stops it too where a shell started it in the background, which leaves SIGINT
    # ignored: a stop asked for by name is honoured, and the working folder removed
    with contextlib.suppress(ValueError):  # only the main thread may set handlers
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        vocab = _check_flags(args)
        Corpus(args.corpus, args.field)  # exists and is not empty
        req = Request(
            corpus=args.corpus,
            out=args.out,
            field=args.field,
            vocab=vocab,
            tokenizer=args.tokenizer,
            val_fraction=args.val_fraction,
            seed=args.seed,
            sample_bytes=args.sample_mb * 1e6,
            force=args.force,
        )
        meta = prepare(req, claim_out(req))
    except (DataError, OutputError) as exc:
        return fail(str(exc))
    except (KeyboardInterrupt, SystemExit) as exc:  # Ctrl-C, or SIGTERM (terminate_cleanly)
        code = exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 130
        print(f"depthwidth: data prepare stopped (exit {code}); nothing was written.", file=sys.stderr)
        return code
    _say_done(args, meta)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `data prepare` to the `depthwidth` parser."""
    p = subparsers.add_parser(
        "data",
        help="prepare a text corpus as token files",
        description="Turn a text corpus into token files that sweeps train on.",
    )
    sub = p.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    q = sub.add_parser(
        "prepare",
        help="tokenize a corpus into train.bin, val.bin and meta.json",
        description="Tokenize CORPUS (a text file, a folder of them, or JSONL/Parquet with a text "
        "field) with a byte-level BPE trained on it (--vocab) or a given tokenizer.json "
        "(--tokenizer), split by document, into DIR/train.bin, val.bin (nanoGPT's flat layout), "
        "tokenizer.json and meta.json. Offline; nothing is downloaded.",
    )
    q.add_argument("corpus", help="text file, folder of files, or .jsonl/.parquet file")
    q.add_argument("--out", required=True, metavar="DIR", help="folder for the prepared data")
    q.add_argument(
        "--field", default="text", help="the text field of JSONL or Parquet records (default text)"
    )
    q.add_argument("--vocab", type=int, help="symbols of the BPE trained on the corpus (default 32768)")
    q.add_argument("--tokenizer", metavar="PATH", help="use this tokenizer.json instead of training one")
    q.add_argument(
        "--val-fraction",
        type=float,
        default=0.005,
        help="share of documents held out for validation (default 0.005)",
    )
    q.add_argument("--seed", type=int, default=0, help="seed of the split by document (default 0)")
    q.add_argument(
        "--sample-mb",
        type=float,
        default=1000.0,
        help="train the BPE on at most this many MB of the train documents (default 1000)",
    )
    q.add_argument(
        "--force",
        action="store_true",
        help="replace the prepared data already in DIR (only files an earlier data prepare wrote)",
    )
    q.set_defaults(func=cmd_prepare)

    def usage(args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(func=usage)
