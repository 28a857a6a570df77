from pathlib import Path

import pytest

from sluiceway.config.loader import ConfigError, load_settings
from sluiceway.config.settings import EncoderModelSettings


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "sluiceway.toml"
    p.write_text(text)
    return p


def test_defaults_serve_the_default_models() -> None:
    s = load_settings(env={})
    assert s.server.host == "127.0.0.1" and s.server.port == 8000
    assert s.models[0].id == "all-minilm-l6-v2"


def test_precedence_flags_over_env_over_file_over_defaults(tmp_path: Path) -> None:
    cfg = write(tmp_path, "[server]\nport = 7000\nlog_level = 'warning'\nrequest_timeout_s = 5\n")
    s = load_settings(cfg, env={})
    assert (s.server.port, s.server.log_level, s.server.request_timeout_s) == (7000, "warning", 5.0)
    s = load_settings(cfg, env={"SLUICEWAY_PORT": "7100", "SLUICEWAY_API_KEYS": "a,b"})
    assert s.server.port == 7100 and s.server.api_keys == ("a", "b")
    s = load_settings(cfg, env={"SLUICEWAY_PORT": "7100"}, overrides={"port": 7200})
    assert s.server.port == 7200 and s.server.log_level == "warning"


def test_config_path_from_env(tmp_path: Path) -> None:
    cfg = write(tmp_path, "[server]\nport = 7300\n")
    assert load_settings(env={"SLUICEWAY_CONFIG": str(cfg)}).server.port == 7300


def test_a_models_list_replaces_the_defaults(tmp_path: Path) -> None:
    cfg = write(
        tmp_path,
        '[[models]]\nengine = "onnx"\nid = "mine"\npath = "/m"\n[models.batching]\nmax_batch_size = 4\n',
    )
    (model,) = load_settings(cfg, env={}).models
    assert isinstance(model, EncoderModelSettings)
    assert model.id == "mine" and model.batching.max_batch_size == 4


@pytest.mark.parametrize(
    ("text", "env", "needle"),
    [
        ("[server]\nport = 'x'\n", {}, "$.server.port"),
        ("", {"SLUICEWAY_PORT": "abc"}, "$.server.port"),
        ("[server]\nnope = 1\n", {}, "nope"),
        (
            "[[models]]\nengine = 'onnx'\nid = 'a'\nbatching = {max_wait_ms = 'soon'}\n",
            {},
            "$.models[0].batching.max_wait_ms",
        ),
        ("[[models]]\nengine = 'tpu'\nid = 'a'\n", {}, "engine"),
        (
            "[[models]]\nengine = 'onnx'\nid = 'a'\n[[models]]\nengine = 'onnx'\nid = 'a'\n",
            {},
            "'a' is used twice",
        ),
        ("[server\n", {}, "not valid TOML"),
    ],
)
def test_bad_values_name_the_key(
    tmp_path: Path, text: str, env: dict[str, str], needle: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(write(tmp_path, text), env=env)
    assert needle in str(err.value)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "absent.toml", env={})
