"""`export --push USER/NAME`: the exported folder uploaded to a Hugging Face Hub model repository through
huggingface_hub (created if missing), so that `from_pretrained("USER/NAME")` pulls it anywhere.

The repository's id is checked before anything is read or written. A push that fails (no login, no
network, HF_HUB_OFFLINE set) leaves the export written and says how to push it later with huggingface_hub's
own `hf upload`. The repository's other files are kept; only those an export owns and may not write again
(a tokenizer, the transformers copy) are removed first, as `export` does in its folder.
"""

from __future__ import annotations

from pathlib import Path

from lit_attention.errors import ConfigError


def check_repo_id(repo_id: str) -> None:
    """One sentence for an id the Hub would refuse, before any work."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        if repo_id.count("/") != 1:
            raise HFValidationError("not user/name")
        validate_repo_id(repo_id)
    except HFValidationError:
        raise ConfigError(
            f"--push {repo_id!r} is not a Hub repository's id; give user/name (letters, digits, '-', '_' and '.')."
        ) from None


def push(folder: Path, repo_id: str, private: bool, owned: list[str]) -> str:
    """Upload `folder` to `repo_id`; its address. `owned`: the repository's files an export may replace or drop."""
    import huggingface_hub

    api = huggingface_hub.HfApi()
    failing(lambda: api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True), folder, repo_id)
    if private and not failing(lambda: api.repo_info(repo_id, repo_type="model").private, folder, repo_id):
        # create_repo leaves an existing repository as it is: a public one would take a --private export
        raise ConfigError(
            f"--private: the Hub repository {repo_id!r} exists and is public, so nothing was uploaded; make it private "
            f"on the Hub (or drop --private to push to it as it is). The export is written to {str(folder)!r}."
        )
    failing(
        lambda: api.upload_folder(
            repo_id=repo_id,
            folder_path=folder,
            repo_type="model",
            delete_patterns=owned,
            commit_message=f"lit-attention export of {folder.name}",
        ),
        folder,
        repo_id,
    )
    return f"https://huggingface.co/{repo_id}"


def failing(call, folder: Path, repo_id: str):
    """`call()`, with a failure of the Hub or the network said in one sentence that keeps the written export."""
    from huggingface_hub.errors import HfHubHTTPError

    try:
        return call()
    except (HfHubHTTPError, OSError, ValueError, *transport_errors()) as error:
        raise ConfigError(
            f"The export is written to {str(folder)!r}, but pushing it to {repo_id!r} failed "
            f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else 'no detail'}); log in with "
            f"`hf auth login` and go online (HF_HUB_OFFLINE unset), or push it later with `hf upload {repo_id} {folder}`."
        ) from None


def transport_errors() -> tuple[type[Exception], ...]:
    """The HTTP client's own connection errors: huggingface_hub's releases use requests (OSError's),
    httpx or httpx2, whose errors are not OSError's."""
    found = []
    for module in ("httpx", "httpx2"):
        try:
            found.append(__import__(module).HTTPError)
        except (ImportError, AttributeError):
            pass
    return tuple(found)
