"""The pydantic model of ``POST /items`` shared by the peers whose users validate with pydantic (FastAPI,
BlackSheep, Sanic, Falcon): one definition, so they all check the same limits (from payloads.py)."""
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

import payloads as p


class ItemIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(min_length=1, max_length=p.ITEM_NAME_MAX)]
    price: Annotated[float, Field(ge=0, le=p.ITEM_PRICE_MAX)]
    tags: Annotated[list[Annotated[str, StringConstraints(max_length=p.ITEM_TAG_MAX)]],
                    Field(max_length=p.ITEM_TAGS_MAX)] = []
