"""A chat message: what prompts are built from and what a provider is sent."""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: str  # "system" | "user" | "assistant"
    content: str
