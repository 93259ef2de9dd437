"""`depthwidth data prepare CORPUS --out DIR`: a text corpus (a file, a folder, JSONL or Parquet
with a text field) tokenized into train.bin, val.bin and meta.json (depthwidth/data/prepare.py),
which a sweep's [data] names as `source = "tokens"`, `path = DIR`. Bad input: one sentence naming
the field and value, exit code 2, nothing written (docs/data.md, "Prepare a corpus").
"""

from __future__ import annotations

import argparse
from pathlib import Path

from depthwidth.clitools import OutputError, check_output_dir, fail, store_containing


def _check_out(args: argparse.Namespace) -> None:
    from depthwidth.data.prepare import prepared_names

    check_output_dir(args.out, "--out")
    if (store := store_containing(args.out)) is not None:
        raise OutputError(
            f"--out = {args.out!r} is invalid: it lies inside the results store {str(store)!r}; "
            f"prepare the data in a folder of its own."
        )
    corpus = Path(args.corpus).expanduser().absolute()
    out = Path(args.out).expanduser().absolute()
    if corpus.is_dir() and (out == corpus or corpus in out.parents):
        raise OutputError(
            f"--out = {args.out!r} is invalid: it lies inside CORPUS = {args.corpus!r}, which "
            f"would then read its own output."
        )
    if (held := prepared_names(out)) and not args.force:
        raise OutputError(
            f"--out = {args.out!r} is invalid: it already holds prepared data ({', '.join(held)}); "
            f"give --force to replace it."
        )


def cmd_prepare(args: argparse.Namespace) -> int:
    from depthwidth.data.base import DataError
    from depthwidth.data.corpus import Corpus
    from depthwidth.data.prepare import DEFAULT_VOCAB, Request, check_vocab, load_tokenizer, prepare

    try:
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
        vocab = None if args.tokenizer else (args.vocab if args.vocab is not None else DEFAULT_VOCAB)
        if vocab is not None:
            check_vocab(vocab)
        else:
            load_tokenizer(args.tokenizer)
        Corpus(args.corpus, args.field)  # exists and is not empty
        _check_out(args)
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
        meta = prepare(req)
    except (DataError, OutputError) as exc:
        return fail(str(exc))
    print(
        f"prepared {args.out}: {meta['documents']:,} documents, {meta['train']['tokens']:,} train and "
        f"{meta['val']['tokens']:,} val tokens ({meta['dtype']}), vocabulary {meta['vocab_size']:,}, "
        f"hash {meta['hash'][:16]}"
    )
    print(f'train on it with [data] source = "tokens", path = "{args.out}" (or --data tokens:{args.out})')
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
    q.add_argument("--force", action="store_true", help="replace prepared data already in DIR")
    q.set_defaults(func=cmd_prepare)

    def usage(args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(func=usage)
