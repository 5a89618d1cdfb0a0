"""Byte-level BPE as Hugging Face tokenizers implement it (GPT-2's pre-tokenization and byte alphabet),
for the LLM fixtures of tests/llm/make_llama.py: a small trainer, an encoder, the tokenizer.json /
tokenizer_config.json it is written as, and a comparison with npm @huggingface/tokenizers."""

import json
import math
import os
import subprocess
import tempfile
import unicodedata


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character table: printable Latin-1 bytes map to themselves,
    the others to 256, 257, ... in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}
# Unicode White_Space (what the regex engines of the tokenizers library take \s to be).
WHITESPACE = set(map(chr, [*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028,
                           0x2029, 0x202F, 0x205F, 0x3000]))
CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


def _is_letter(c):
    return unicodedata.category(c)[0] == "L"


def _is_number(c):
    return unicodedata.category(c)[0] == "N"


def _is_other(c):
    return not (c in WHITESPACE or _is_letter(c) or _is_number(c))


def pretokenize(text):
    """The pieces GPT2_PATTERN finds, alternatives tried in order at each position, as a regex engine
    with look-ahead does."""
    pieces, i, n = [], 0, len(text)
    while i < n:
        end = None
        for c in CONTRACTIONS:
            if text.startswith(c, i):
                end = i + len(c)
                break
        if end is None:
            j = i + 1 if text[i] == " " and i + 1 < n else i
            for cls in (_is_letter, _is_number, _is_other):
                if j < n and cls(text[j]):
                    end = j + 1
                    while end < n and cls(text[end]):
                        end += 1
                    break
        if end is None:
            # text[i] is whitespace (a lone space before whitespace or the end falls through to here).
            run = i
            while run < n and text[run] in WHITESPACE:
                run += 1
            if run == n:
                end = run                   # \s+(?!\S) at the end of the text
            elif run - 1 > i:
                end = run - 1               # \s+(?!\S) leaves the last space for the next word
            else:
                end = run                   # \s+
        pieces.append(text[i:end])
        i = end
    return pieces


def to_symbols(piece):
    return tuple(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))


def train_bpe(texts, merges):
    """Learns `merges` merges by pair frequency over the pre-tokenized words (ties: the pair that sorts
    first). Incremental pair counts, so it runs in seconds."""
    words = {}
    for text in texts:
        for piece in pretokenize(text):
            words[piece] = words.get(piece, 0) + 1
    seqs = [list(to_symbols(w)) for w in words]
    freqs = list(words.values())
    pairs, where = {}, {}
    for wi, s in enumerate(seqs):
        for a, b in zip(s, s[1:]):
            pairs[(a, b)] = pairs.get((a, b), 0) + freqs[wi]
            where.setdefault((a, b), set()).add(wi)
    learned = []
    for _ in range(merges):
        top = max(pairs.values(), default=0)
        if top <= 0:
            break
        pair = min(p for p, c in pairs.items() if c == top)
        learned.append(pair)
        merged = pair[0] + pair[1]
        for wi in list(where.get(pair, ())):
            s, f = seqs[wi], freqs[wi]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] -= f
            out, k = [], 0
            while k < len(s):
                if k + 1 < len(s) and s[k] == pair[0] and s[k + 1] == pair[1]:
                    out.append(merged)
                    k += 2
                else:
                    out.append(s[k])
                    k += 1
            seqs[wi] = out
            for a, b in zip(out, out[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + f
                where.setdefault((a, b), set()).add(wi)
        del pairs[pair]
        where.pop(pair, None)
    return learned


class Tokenizer:
    """A byte-level BPE: the 256 byte characters (ids 0-255), one token per merge (in merge order),
    then the special tokens (the first is BOS, the second EOS)."""

    def __init__(self, merges, special_tokens, model_max_length):
        self.merges = merges
        self.special_tokens = special_tokens
        self.model_max_length = model_max_length
        self.ranks = {pair: r for r, pair in enumerate(merges)}
        self.vocab = {BYTE_TO_CHAR[b]: i for i, b in enumerate(sorted(BYTE_TO_CHAR))}
        for a, b in merges:
            self.vocab[a + b] = len(self.vocab)
        self.special = {t: len(self.vocab) + k for k, t in enumerate(special_tokens)}
        self.cache = {}

    def _bpe(self, piece):
        syms = list(to_symbols(piece))
        while len(syms) > 1:
            ranked = [(self.ranks.get((a, b), math.inf), k) for k, (a, b) in enumerate(zip(syms, syms[1:]))]
            rank, _ = min(ranked)
            if rank == math.inf:
                break
            a, b = self.merges[rank]
            out, k = [], 0
            while k < len(syms):
                if k + 1 < len(syms) and syms[k] == a and syms[k + 1] == b:
                    out.append(a + b)
                    k += 2
                else:
                    out.append(syms[k])
                    k += 1
            syms = out
        return [self.vocab[s] for s in syms]

    def encode(self, text):
        """Ids of `text` without special tokens (what add_special_tokens=False gives)."""
        ids = []
        for piece in pretokenize(text):
            got = self.cache.get(piece)
            if got is None:
                got = self.cache[piece] = self._bpe(piece)
            ids.extend(got)
        return ids

    def decode(self, ids):
        inv = {i: s for s, i in self.vocab.items()}
        return bytes(CHAR_TO_BYTE[c] for i in ids for c in inv[i]).decode("utf-8", errors="replace")

    def tokenizer_json(self):
        added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                  "normalized": False, "special": True} for t, i in self.special.items()]
        bos = self.special_tokens[0]
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": added,
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                              "use_regex": True},
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {bos: {"id": bos, "ids": [self.special[bos]], "tokens": [bos]}},
            },
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": False, "vocab": self.vocab,
                      "merges": [[a, b] for a, b in self.merges]},
        }

    def tokenizer_config_json(self):
        decoder = {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                            "single_word": False, "special": True} for t, i in self.special.items()}
        return {"added_tokens_decoder": decoder, "bos_token": self.special_tokens[0], "clean_up_tokenization_spaces": False,
                "eos_token": self.special_tokens[1], "model_input_names": ["input_ids", "attention_mask"],
                "model_max_length": self.model_max_length, "tokenizer_class": "PreTrainedTokenizerFast"}


def check_tokenizer_with_npm(tok, tok_json, lines, node_modules):
    """Compares our ids with @huggingface/tokenizers' on `lines`; returns (lines checked, mismatches)."""
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "tokenizer.json"), "w") as f:
            json.dump(tok_json, f)
        with open(os.path.join(tmp, "tokenizer_config.json"), "w") as f:
            json.dump(tok.tokenizer_config_json(), f)
        with open(os.path.join(tmp, "lines.json"), "w") as f:
            json.dump(lines, f)
        script = os.path.join(tmp, "encode.mjs")
        entry = os.path.join(os.path.abspath(node_modules), "@huggingface", "tokenizers", "dist", "tokenizers.mjs")
        with open(script, "w") as f:
            f.write(f"""import {{ Tokenizer }} from {json.dumps(entry)};
import {{ readFileSync, writeFileSync }} from "node:fs";
const dir = {json.dumps(tmp)};
const t = new Tokenizer(JSON.parse(readFileSync(dir + "/tokenizer.json", "utf8")),
                        JSON.parse(readFileSync(dir + "/tokenizer_config.json", "utf8")));
const lines = JSON.parse(readFileSync(dir + "/lines.json", "utf8"));
const out = lines.map(l => t.encode(l, {{ add_special_tokens: false }}).ids);
const withBos = t.encode(lines[0]).ids;
writeFileSync(dir + "/ids.json", JSON.stringify({{ out, withBos, decoded: t.decode(out[0]) }}));
""")
        subprocess.run(["node", script], check=True)
        with open(os.path.join(tmp, "ids.json")) as f:
            got = json.load(f)
    bad = [i for i, line in enumerate(lines) if tok.encode(line) != got["out"][i]]
    for i in bad[:5]:
        print(f"tokenizer mismatch on line {i}: {lines[i]!r}\n  ours {tok.encode(lines[i])}\n  npm  {got['out'][i]}")
    if got["withBos"] != [tok.special[tok.special_tokens[0]]] + tok.encode(lines[0]):
        bad.append("bos")
        print("tokenizer mismatch: the post-processor did not prepend <|begin_of_text|>")
    if got["decoded"] != lines[0]:
        bad.append("decode")
        print(f"tokenizer mismatch: decode gave {got['decoded']!r}")
    return len(lines), bad
