"""The `run` command's fault-package options, made from the nemesis registry when the command is
parsed or its help is shown: every registered package's settings (nemesis/registry.py) become
options (`--partition-targets`, `--one-way`, ...), and the help lists the packages. A package
registered after import (a plugin, a test's toy package) shows up as well."""

from __future__ import annotations

from typing import Any

import click


def setting_option(setting: Any) -> click.Option:
    """The click option of one registry Setting: a flag for a bool, a float, or a comma-separated list."""
    if setting.kind == "bool":
        return click.Option([setting.flag], is_flag=True, default=setting.default, help=setting.help)
    default = setting.text(setting.default)
    return click.Option([setting.flag], default=default, show_default=True,
                        type=float if setting.kind == "float" else str, help=setting.help)


class RunCommand(click.Command):
    """A click command whose parameters are its own plus one option per registered package setting."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        from nemesis import registry

        own = super().get_params(ctx)
        taken = {p.name for p in own}
        extra = [setting_option(s) for name, s in registry.settings().items() if name not in taken]
        # Before --help (click's help option is the last of get_params), so the usage lists them with the others.
        help_option = self.get_help_option(ctx)
        return [p for p in own if p is not help_option] + extra + ([help_option] if help_option is not None else [])

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from nemesis import registry

        super().format_epilog(ctx, formatter)
        with formatter.section("Fault packages (--nemesis)"):
            formatter.write_dl([(p.name, p.summary or "") for p in registry.packages().values()])
