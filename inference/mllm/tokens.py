"""The AnimeGamer tokenizer's added tokens, as data, and a check against a loaded tokenizer.

The released tokenizer is Mistral's SentencePiece model (32000 ids, BOS 1) with 284 added tokens
at fixed ids 32000..32283. The prompt builder works on ids, never on token strings, so these ids
are the contract between the prompt and the checkpoint's embedding rows; `verify` makes sure a
tokenizer directory agrees with them before any prompt is built.
"""

from __future__ import annotations

from dataclasses import dataclass

BASE_VOCAB = 32000
VOCAB_SIZE = 32284
BOS_ID, EOS_ID, UNK_ID = 1, 2, 0
NUM_FRAME_TOKENS = 256  # <frame_00000>..<frame_00255>; a turn's video span uses the first 226
STRENGTH_VALUES = tuple(range(-5, 6))  # <Strength_-5>..<Strength_5>


def _added_tokens() -> dict[str, int]:
    table: dict[str, int] = {}
    for i in range(NUM_FRAME_TOKENS):
        table[f"<frame_{i:05d}>"] = BASE_VOCAB + i
    for name in ("<img>", "</img>", "<vid>", "</vid>", "<frame>", "</frame>"):
        table[name] = BASE_VOCAB + len(table)
    for v in STRENGTH_VALUES:
        table[f"<Strength_{v}>"] = BASE_VOCAB + len(table)
    for name in ("<visual>", "<ML>", "</ML>", "<SC>", "</SC>", "<ET>", "</ET>", "<ST>", "</ST>"):
        table[name] = BASE_VOCAB + len(table)
    for name in ("<TURN>", "</TURN>"):
        table[name] = BASE_VOCAB + len(table)
    return table


# token string -> id, exactly as in the released animegamer_tokenizer/added_tokens.json
ADDED_TOKENS: dict[str, int] = _added_tokens()
assert len(ADDED_TOKENS) == VOCAB_SIZE - BASE_VOCAB


@dataclass(frozen=True)
class SpecialIds:
    """The ids the prompt builder and the state decoder use."""

    bos: int = BOS_ID
    img: int = ADDED_TOKENS["<img>"]
    img_end: int = ADDED_TOKENS["</img>"]
    frame: int = ADDED_TOKENS["<frame>"]
    frame_end: int = ADDED_TOKENS["</frame>"]
    turn: int = ADDED_TOKENS["<TURN>"]
    turn_end: int = ADDED_TOKENS["</TURN>"]
    # The four state spans, in prompt order: motion level, social, entertainment, stamina.
    state_open: tuple[int, int, int, int] = (
        ADDED_TOKENS["<ML>"], ADDED_TOKENS["<SC>"], ADDED_TOKENS["<ET>"], ADDED_TOKENS["<ST>"]
    )
    state_close: tuple[int, int, int, int] = (
        ADDED_TOKENS["</ML>"], ADDED_TOKENS["</SC>"], ADDED_TOKENS["</ET>"], ADDED_TOKENS["</ST>"]
    )
    strength: tuple[int, ...] = tuple(ADDED_TOKENS[f"<Strength_{v}>"] for v in STRENGTH_VALUES)

    def frame_token(self, i: int) -> int:
        if not 0 <= i < NUM_FRAME_TOKENS:
            raise ValueError(f"frame token index {i} outside 0..{NUM_FRAME_TOKENS - 1}")
        return BASE_VOCAB + i

    def strength_id(self, value: int) -> int:
        return self.strength[STRENGTH_VALUES.index(value)]

    def strength_value(self, token_id: int) -> int:
        return STRENGTH_VALUES[self.strength.index(token_id)]

    @property
    def reserved(self) -> frozenset[int]:
        """Ids that user text must never produce: control tokens and every added token."""
        return frozenset({UNK_ID, BOS_ID, EOS_ID, *ADDED_TOKENS.values()})


SPECIAL = SpecialIds()


class TokenizerMismatch(ValueError):
    pass


def verify(tokenizer) -> SpecialIds:
    """Check that a transformers tokenizer has the released ids; raise TokenizerMismatch if not."""
    problems = []
    if len(tokenizer) != VOCAB_SIZE:
        problems.append(f"vocabulary has {len(tokenizer)} tokens, expected {VOCAB_SIZE}")
    if tokenizer.bos_token_id != BOS_ID:
        problems.append(f"BOS id is {tokenizer.bos_token_id}, expected {BOS_ID}")
    names = list(ADDED_TOKENS)
    ids = tokenizer.convert_tokens_to_ids(names)
    wrong = [(n, got, ADDED_TOKENS[n]) for n, got in zip(names, ids, strict=True) if got != ADDED_TOKENS[n]]
    problems += [f"{n} has id {got}, expected {want}" for n, got, want in wrong[:10]]
    if len(wrong) > 10:
        problems.append(f"... and {len(wrong) - 10} more wrong ids")
    if problems:
        raise TokenizerMismatch(
            "the tokenizer is not the AnimeGamer tokenizer (use the released animegamer_tokenizer "
            "directory): " + "; ".join(problems)
        )
    return SPECIAL


def add_animegamer_tokens(tokenizer) -> None:
    """Add the 284 tokens to a Mistral-vocabulary tokenizer, in id order, with the released flags
    (frame and strength tokens plain and normalized; the markup tokens special)."""
    from tokenizers import AddedToken

    if len(tokenizer) != BASE_VOCAB:
        raise TokenizerMismatch(f"expected Mistral's {BASE_VOCAB}-token vocabulary, got {len(tokenizer)} tokens")
    for name, want in ADDED_TOKENS.items():  # one at a time, so ids follow the table
        plain = name.startswith(("<frame_", "<Strength_"))
        token = AddedToken(name, normalized=plain, special=not plain, lstrip=False, rstrip=False)
        tokenizer.add_tokens([token], special_tokens=not plain)
        got = tokenizer.convert_tokens_to_ids(name)
        if got != want:
            raise TokenizerMismatch(f"{name} got id {got}, expected {want}")


def build_released_tokenizer(mistral_dir, out_dir):
    """The AnimeGamer tokenizer from Mistral-7B-Instruct-v0.1's (the release ships it only in
    its GitHub repository): the same SentencePiece model plus the added tokens, saved to `out_dir`."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(mistral_dir), legacy=False)
    add_animegamer_tokens(tok)
    tok.pad_token = tok.unk_token
    verify(tok)
    tok.save_pretrained(str(out_dir))
    return tok
