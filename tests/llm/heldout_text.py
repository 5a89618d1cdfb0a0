"""Writes the held-out text the language-model algorithm figures calibrate and evaluate on
(docs/algorithms.md, "Language model"; tests/tst_algorithms_lm.cpp).

usage: heldout_text.py LLM_DIR

make_llama.py holds every HOLDOUT_EVERY-th standard-library file out of training, and its
reference/eval.txt (eval_ids.npy's text) is the first lines of that held-out text. What follows
eval.txt is text no fixture model was trained or evaluated on; it is cut at the line nearest its
middle into

  LLM_DIR/heldout/calib.txt   the first half: calibration
  LLM_DIR/heldout/eval.txt    the second half: evaluation

so that calibration, evaluation and eval_ids.npy are three disjoint slices of the same kind of
text (Python sources). The models' tokenizer cuts them into rows when they are read
(`--seq-len`); nothing here tokenizes.
"""

import os
import sys

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_llama import corpus  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[2])
    llm_dir = sys.argv[1]
    with open(os.path.join(llm_dir, "llama_k256", "reference", "eval.txt"), encoding="utf-8") as f:
        eval_text = f.read()
    _, held = corpus()
    held_text = "".join(held)
    if not held_text.startswith(eval_text):
        sys.exit("heldout_text.py: reference/eval.txt is not the start of the held-out text; "
                 "rebuild the LLM fixtures (make_llama.py)")
    rest = held_text[len(eval_text):]
    half = rest.find("\n", len(rest) // 2) + 1
    if half <= 0 or half >= len(rest):
        sys.exit("heldout_text.py: too little held-out text")
    out = os.path.join(llm_dir, "heldout")
    os.makedirs(out, exist_ok=True)
    for name, text in (("calib.txt", rest[:half]), ("eval.txt", rest[half:])):
        tmp = os.path.join(out, name + ".tmp")
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, os.path.join(out, name))
    print(f"heldout_text.py: calib.txt {half} chars, eval.txt {len(rest) - half} chars")


if __name__ == "__main__":
    main()
