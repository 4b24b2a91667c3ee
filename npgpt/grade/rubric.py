"""The rubric: points per test, Gradescope visibility, thresholds.

The default is rubric.json next to this file; `--rubric FILE` is a JSON file of the same shape
whose entries replace the default's, key by key (a partial file is fine):

    {"points": {"numeric": 3}, "components": {"attention": {"dx": 4}},
     "tests": {"LayerNorm.backward: dx": 5}, "visibility": {"numeric": "after_due_date"}}
"""

import json
from importlib import resources

KINDS = (
    "forward",
    "dx",
    "param_grads",
    "accumulate",
    "numeric",
    "dtype_forward",
    "dtype_backward",
    "edge_forward",
    "edge_backward",
)
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")


class Rubric:
    def __init__(self, data):
        self.data = data
        for kind in data["points"]:
            if kind not in KINDS:
                raise ValueError(f"rubric: unknown test kind {kind!r}; kinds are {', '.join(KINDS)}")
        for kind, vis in data["visibility"].items():
            if vis not in VISIBILITIES:
                raise ValueError(
                    f"rubric: visibility of {kind} is {vis!r}; use one of {', '.join(VISIBILITIES)}"
                )

    @classmethod
    def load(cls, path=None):
        data = json.loads(resources.files("npgpt.grade").joinpath("rubric.json").read_text())
        if path:
            try:
                with open(path, encoding="utf-8") as f:
                    override = json.load(f)
            except OSError as e:
                raise ValueError(f"rubric {path}: {e.strerror or e}") from None
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise ValueError(f"rubric {path}: not valid JSON ({e})") from None
            if not isinstance(override, dict):
                raise ValueError(f"rubric {path}: expected a JSON object")
            for key, value in override.items():
                if key not in data:
                    raise ValueError(f"rubric {path}: unknown key {key!r}; keys are {', '.join(data)}")
                if isinstance(value, dict):
                    for k, v in value.items():
                        data[key][k] = {**data[key].get(k, {}), **v} if isinstance(v, dict) else v
                else:
                    data[key] = value
        return cls(data)

    def points(self, component, kind, name, share=1):
        """Points of test `name` of `kind`; param_grads points are shared by `share` tests."""
        if name in self.data["tests"]:
            return float(self.data["tests"][name])
        per = {**self.data["points"], **self.data["components"].get(component, {})}
        return float(per.get(kind, 0.0)) / share

    def visibility(self, kind):
        vis = self.data["visibility"]
        return vis.get(kind, vis.get("default", "visible"))

    def threshold(self, name):
        return float(self.data["thresholds"][name])
