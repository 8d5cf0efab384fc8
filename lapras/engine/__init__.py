"""The LAPRAS engine: ``Engine.answer(plan, user) -> Answer``, with no knowledge of sockets.

One module per job: ``keeper`` (the epoch life cycle: adopt, begin, roll, sync), ``release`` (P's
matrix-mechanism release: prepared from P alone, then measured), ``preparer`` (the thread that prepares
and rolls epochs off the serving path), ``answerer`` (one statement, one stream item: calibrate, decide,
release, commit), ``calibrate`` (noise scale and free estimates), ``selector`` (partition selection and
automatic per-group bounds), ``statements`` (what is asked and answered), ``prediction`` (P) and ``facade``
(``Engine``, wiring them together). Outcomes are ``lapras.outcomes``' enums; what the proxy needs from an
engine is ``lapras.api.EngineAPI``.
"""

from lapras.engine.facade import Engine
from lapras.engine.prediction import Prediction, load_prediction, prediction_from_sql
from lapras.engine.release import PreparedEpoch
from lapras.engine.statements import Answer, PartitionRequest, Preview, StalePlan, Statement
from lapras.outcomes import Outcome, QueryOutcome

__all__ = [
    "Answer", "Engine", "Outcome", "PartitionRequest", "Prediction", "PreparedEpoch", "Preview", "QueryOutcome",
    "StalePlan", "Statement", "load_prediction", "prediction_from_sql",
]
