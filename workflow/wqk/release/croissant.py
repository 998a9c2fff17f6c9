"""croissant.json of a release: Croissant 1.0 (MLCommons) metadata. Each table is a FileObject
with its sha256 and a RecordSet whose fields name its columns, their types and meanings
(tests/test_release.py loads it with mlcroissant and reads records through it)."""

from __future__ import annotations

import json

from .card import ROWS, Citation, Table
from .columns import describe

CONFORMS_TO = "http://mlcommons.org/croissant/1.0"
LICENCE_URL = "https://creativecommons.org/licenses/by/4.0/"
PAPER_URL = "https://arxiv.org/abs/2502.10927"
# The standard @context of Croissant 1.0 (mlcroissant warns on any other).
CONTEXT = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}
ENCODINGS = {".parquet": "application/x-parquet", ".csv": "text/csv"}


def _is_list(arrow_type: str) -> bool:
    return arrow_type.startswith(("list<", "large_list<"))


def data_type(arrow_type: str) -> str:
    """The Croissant type of an Arrow type's values (a list's: of its items)."""
    if _is_list(arrow_type):
        arrow_type = arrow_type.split(":", 1)[1].strip(" >")
    if arrow_type in ("bool", "boolean"):
        return "sc:Boolean"
    if arrow_type.startswith(("int", "uint")):
        return "sc:Integer"
    if arrow_type in ("double", "float", "halffloat") or arrow_type.startswith("float"):
        return "sc:Float"
    return "sc:Text"


def _record_set(table: Table) -> dict:
    fields = [
        {
            "@type": "cr:Field",
            "@id": f"{table.name}/{column}",
            "name": column,
            "description": describe(column, table.name) or column,
            "dataType": data_type(kind),
            "source": {"fileObject": {"@id": table.path}, "extract": {"column": column}},
            **({"repeated": True} if _is_list(kind) else {}),
        }
        for column, kind in table.columns
    ]
    return {
        "@type": "cr:RecordSet",
        "@id": table.name,
        "name": table.name,
        "description": ROWS[table.name],
        "field": fields,
    }


def render(name: str, version: str, tables: list[Table], cite: Citation, sums: dict[str, str]) -> str:
    files = [
        {
            "@type": "cr:FileObject",
            "@id": t.path,
            "name": t.path,
            "contentUrl": t.path,
            "encodingFormat": ENCODINGS[t.path[t.path.rindex(".") :]],
            "sha256": sums[t.path],
        }
        for t in tables
    ]
    dataset = {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": CONFORMS_TO,
        "name": name,
        "description": (
            "Symmetry and directionality of the bilinear forms M = W_q W_k^T of attention heads and layers, "
            f"computed from model weights by wqk {version} (reproducing arXiv:2502.10927); see README.md for the "
            "sign conventions and the column dictionary."
        ),
        "license": LICENCE_URL,
        "url": PAPER_URL,
        "version": version,
        "citeAs": f"{cite.paper_bibtex}\n{cite.software_bibtex}",
        "creator": {"@type": "sc:Organization", "name": "the wqk authors"},
        "keywords": ["attention", "transformers", "interpretability", "symmetry"],
        "distribution": files,
        "recordSet": [_record_set(t) for t in tables],
    }
    return json.dumps(dataset, indent=2, sort_keys=True, ensure_ascii=True) + "\n"
