"""The one exception a user can cause. Its message is a single sentence that names the file,
field or setting at fault and what to do; the CLI prints it without a traceback. Such a
sentence, or any reason stored for a failure, never shows a secret (mask_secrets)."""

import re
from collections.abc import Iterable

MASKED_LENGTH = 8   # a secret this long is masked wherever it occurs; a shorter one standing alone


class RecallwatchError(Exception):
    """A problem the user can fix (bad path, bad option, busy warehouse, ...)."""


def mask_secrets(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret replaced by `***`: one of MASKED_LENGTH characters or more
    wherever it occurs, a shorter one where it stands alone (not inside a word: masking every
    `k` of a one-letter API key, as a local judge server takes, garbled each reason and showed
    where the letter occurs in it)."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        if len(secret) >= MASKED_LENGTH:
            text = text.replace(secret, "***")
        else:
            text = re.sub(rf"(?<!\w){re.escape(secret)}(?!\w)", "***", text)
    return text
