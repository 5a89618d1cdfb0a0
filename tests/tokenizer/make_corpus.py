#!/usr/bin/env python3
"""Writes the tokenizer test corpus (a JSON list of strings) to OUT.

Lines come from files every Debian machine has (Python's standard-library
sources, the licence texts under /usr/share/common-licenses), taken in a fixed
order, plus lines composed here for what those files lack: accents, CJK, emoji
with ZWJ sequences, Arabic, whitespace runs, tabs, newlines, digit runs,
contractions and special tokens written in the text, and random lines drawn
(with a fixed seed) from pieces of all of those. Both the reference (node)
and tst_tokenizer read the same file, so a missing source file only shortens
the corpus.
"""
import json
import pathlib
import random
import sys

PYTHON_SOURCES = ["textwrap.py", "difflib.py", "argparse.py", "json/encoder.py", "csv.py", "string.py",
                  "locale.py", "calendar.py", "fractions.py", "shlex.py", "unicodedata.py", "html/entities.py"]
LICENCES = ["GPL-3", "Apache-2.0", "MPL-2.0", "Artistic", "GFDL-1.3"]

COMPOSED = [
    # accents and other Latin scripts, precomposed and decomposed (NFC matters for Qwen)
    "Café crème brûlée, naïve façade, jalapeño, Ångström, Øresund, Łódź, İstanbul",
    "Cafe\u0301 cre\u0300me bru\u0302le\u0301e — decomposed accents",
    "Straße, Maß, ſ long s, ﬁ ligature, Ǆ digraph, ǅ titlecase, Ω Ohm sign \u2126, K Kelvin \u212a",
    "Ελληνικά: Καλημέρα κόσμε. Русский: Съешь же ещё этих мягких французских булок.",
    "Tiếng Việt có dấu: Nguyễn Thị Minh Khai, đường phố Hà Nội",
    # CJK, Japanese, Korean, Thai, Hindi
    "中文：我能吞下玻璃而不伤身体。北京是中华人民共和国的首都。",
    "日本語：私はガラスを食べられます。それは私を傷つけません。カタカナとひらがな",
    "한국어: 나는 유리를 먹을 수 있어요. 그래도 아프지 않아요",
    "ภาษาไทย: ฉันกินกระจกได้ แต่มันไม่ทำให้ฉันเจ็บ",
    "हिन्दी: मैं काँच खा सकता हूँ और मुझे उससे कोई चोट नहीं पहुंचती",
    "混合 mixed 文字 text 123 漢字456 and ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
    # Arabic and Hebrew (right to left), with marks
    "العربية: أنا قادر على أكل الزجاج و هذا لا يؤلمني. مَرْحَبًا",
    "עברית: אני יכול לאכול זכוכית וזה לא מזיק לי",
    # emoji, including ZWJ sequences, skin tones, flags, keycaps
    "Emoji: 😀 😃 🎉 👍🏽 ❤️ 🇫🇷🇯🇵 1️⃣ #️⃣",
    "Family: 👨‍👩‍👧‍👦 and 👩🏾‍💻 and 🏳️‍🌈 and 🧑‍🤝‍🧑",
    "😀😀😀😀😀😀😀😀 repeated emoji without spaces🎉🎉",
    # whitespace runs, tabs, newlines, other spaces
    "two  spaces   three    four     five      six",
    "\ttab\tseparated\tvalues\t\t\tand trailing tabs\t\t",
    "line one\nline two\n\nline four after a blank line\n",
    "windows\r\nline\r\nendings\r\n\r\n",
    "   leading spaces and trailing spaces   ",
    "\n\n\nleading newlines",
    "mixed \t \n \t\n  whitespace \u00a0nbsp \u2003em space \u3000ideographic space",
    "zero width\u200bspace, joiner\u200d, non-joiner\u200c, BOM\ufeffinside, NEL\u0085here",
    "vertical\x0btab and form\x0cfeed and unit\x1fseparator",
    "    def indented(self):\n        return {'a': 1, \"b\": [2, 3]}\n",
    " ",
    "  ",
    "\n",
    "\t",
    "a",
    "",
    # digit runs
    "1 12 123 1234 12345 123456 1234567 12345678901234567890",
    "3.14159265358979 2.718281828 6.022e23 -42 +7 0x1F 0b1010 1,000,000",
    "Phone: +1 (555) 123-4567, date 2026-11-27T01:30:00Z, version v1.2.3-rc4",
    "٠١٢٣٤٥٦٧٨٩ Arabic-Indic digits, ०१२३ Devanagari digits, ½ ¾ ² ³ Ⅻ roman",
    # contractions, quotes
    "I'm sure they'll say it's fine, but we've heard you'd rather they're not; don't.",
    "I'M SURE THEY'LL SAY IT'S FINE, BUT WE'VE HEARD YOU'D RATHER THEY'RE NOT",
    "rock 'n' roll, 'quoted', ''double'', o'clock, ’curly’ ‘quotes’ “double”",
    "it'S mIxEd'Ll cAsE'Ve 'ſ 'K",
    # punctuation and symbols
    "Punctuation!!! Really??? Yes... (parens) [brackets] {braces} <angles> @user #tag $5 %20 ^_^ &&& *** ~~~",
    "Symbols: © ® ™ € £ ¥ ₿ ∑ ∫ √ ∞ ≠ ≤ ≥ ← → ↔ ⇒ ♠ ♣ ♥ ♦ ✓ ✗ ★",
    "path/to/file.txt C:\\Windows\\System32 https://example.org/a?b=c&d=e#frag user@example.com",
    "a_b-c.d:e;f,g!h?i'j\"k`l~m@n#o$p%q^r&s*t(u)v[w]x{y}z|",
    "====================================================================",
    "-- ---- -------- __init__ __main__ ... .... ....... ",
    # special tokens written in the text
    "<s>Hello</s> world <unk> inside",
    "<|begin_of_text|>Hello<|end_of_text|><|eot_id|> and <|start_header_id|>user<|end_header_id|>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>",
    "<think>reasoning</think> answer <tool_call>{\"x\": 1}</tool_call>",
    "<|endoftext|>after end of text <|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
    "partial specials: <| <|im_ <s <|begin_of_text| </s",
    "<s><s></s></s> stacked and <|im_start|><|im_start|>",
    "text before<s>text after",
    # long words and odd sequences
    "Pneumonoultramicroscopicsilicovolcanoconiosis supercalifragilisticexpialidocious",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "abababababababababababababababababababab xyzxyzxyzxyzxyzxyz",
    "CamelCaseIdentifier snake_case_identifier kebab-case-identifier SCREAMING_CASE",
    "e\u0301\u0301\u0301 stacked combining marks a\u0308\u0304 Z\u0351\u0344\u0353a\u0306l\u0331g\u0350o",
    "private use \ue000\uf8ff and plane 2 𠀀𠀁 and math 𝔸𝔹ℂ 𝒜 and old italic 𐌰𐌱",
    "replacement \ufffd and noncharacter-adjacent \ufdd0 text",
]


# Pieces random lines are drawn from: every character class the split patterns
# tell apart, the characters where \s definitions differ (NBSP, NEL, BOM, U+1680,
# U+2028), apostrophe contractions in both cases, combining marks, digits of
# other scripts, and fragments of special tokens.
RANDOM_PIECES = [
    " ", "  ", "\t", "\n", "\r", "\r\n", "\n\n", "\x0b", "\x0c", "\u00a0", "\u0085", "\ufeff", "\u1680", "\u2028",
    "\u3000", "\u200b", "\u200d", "a", "Z", "word", "Mixed", "\u00e9", "e\u0301", "\u00df", "\u017f", "\u0130", "\u03a9",
    "\u0416", "\u4e2d\u6587", "\u3042", "\ud55c", "\u0639\u0631\u0628", "\u05e9", "\u0e01\u0e34", "\u0928\u093f",
    "0", "7", "42", "123", "4567", "\u0663", "\u096a", "\u00bd", "\u00b2", "\u2167", "'", "'s", "'S", "'t", "'re", "'VE",
    "'m", "'ll", "'LL", "'d", "'x", "\u2019s", ".", ",", "!", "?", "...", "-", "_", "(", ")", "{", "}", "#", "$", "%",
    "\\", "/", "\"", "\u00a9", "\u20ac", "\u2211", "\U0001f600", "\U0001f44d\U0001f3fd", "\U0001f468\u200d\U0001f469",
    "\u2764\ufe0f", "\U0001f1eb\U0001f1f7", "\ue000", "\U00020000", "\U0001d538", "\u2581", "\u0120", "<0x41>",
    "<s>", "</s>", "<unk>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<think>", "</think>",
    "<|", "|>",
    "<", ">", "<s", "s>",
]


def random_lines(count):
    rng = random.Random(21)  # fixed: the corpus is the same on every machine
    lines = []
    for _ in range(count):
        n = rng.randint(1, 24)
        lines.append("".join(rng.choice(RANDOM_PIECES) for _ in range(n)))
    return lines


def python_lines(root):
    lines = []
    for name in PYTHON_SOURCES:
        path = root / name
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace").split("\n")
        lines += [l for l in text[:900:2] if l.strip()]
        # multi-line chunks keep indentation and newlines together
        for start in range(0, min(len(text), 900), 30):
            lines.append("\n".join(text[start:start + 6]))
    return lines


def licence_lines(root):
    lines = []
    for name in LICENCES:
        path = root / name
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace").split("\n")
        lines += [l for l in text[:900:2] if l.strip()]
        for start in range(0, min(len(text), 900), 40):
            lines.append("\n".join(text[start:start + 8]))
    return lines


def main():
    out = pathlib.Path(sys.argv[1])
    lines = COMPOSED + python_lines(pathlib.Path("/usr/lib/python3.11")) + \
        licence_lines(pathlib.Path("/usr/share/common-licenses"))
    # Pairs of composed lines joined: specials and scripts next to each other.
    lines += [COMPOSED[i] + COMPOSED[(i * 7 + 3) % len(COMPOSED)] for i in range(len(COMPOSED))]
    lines += random_lines(1500)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(lines, ensure_ascii=False), encoding="utf-8")
    tmp.replace(out)
    print(f"make_corpus.py: {len(lines)} lines, {sum(len(l.encode()) for l in lines)} bytes -> {out}")


if __name__ == "__main__":
    main()
