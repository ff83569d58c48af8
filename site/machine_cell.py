# Injected as the last cell of every page by site/build_site.py (its input hidden): where this page ran.
import datetime as _dt

from d2l_async import config as _config
from d2l_async.devices import describe_machine as _describe_machine, machine as _machine
from page_outputs import machine_line as _machine_line

_here = _machine(sample_s=0.5)
print(_machine_line(day=f"{_dt.date.today():%d %B %Y}", quick=_config.quick_mode(), machine=_describe_machine(_here),
                    usable_cpus=_here.usable_cpus, spare_cpus=_here.spare_cpus))
