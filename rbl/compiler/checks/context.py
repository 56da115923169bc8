"""What the checker passes share: the program, the catalogue, diagnostics and the results so far."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...lang import ast
from ...lang.diagnostics import Diagnostics
from ...lang.source import SourceFile
from ..space import ClientSpec, NoiseAssertion, Objective, SizeAssertion
from ...topology import Topology
from ..workload import Workload


@dataclass
class CheckContext:
    program: ast.Program
    source: SourceFile
    diags: Diagnostics
    space: ast.Space | None = None
    libraries: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)       # setting key -> Value or Axis
    clients: list[ClientSpec] = field(default_factory=list)
    assertions: list[SizeAssertion] = field(default_factory=list)
    noise: NoiseAssertion | None = None                 # `assert noise < 5%`
    workload: Workload | None = None                     # an open-loop space's load dimension (checks/load.py)
    topology: Topology | None = None                     # the services of `topology { ... }` (checks/topology.py)
    lets: dict = field(default_factory=dict)            # `let` name -> ast.Let
    used_lets: set = field(default_factory=set)
    size_overridden: bool = False       # a command-line override changed the size (rbl/compiler/overrides.py)
    defaults: dict = field(default_factory=dict)        # id(ParamDef) -> its Param at the default
    setting_spans: dict = field(default_factory=dict)   # setting key -> the span of the statement setting it
    objective: Objective | None = None                   # `objective = ...` (checks/objective.py)
