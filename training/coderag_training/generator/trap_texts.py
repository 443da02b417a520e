"""The wording trap samples are built from: the absent technologies and unsafe requests of type A,
the vague questions and clarifying answers of type B, the process-ending calls type C premises
name, and the grounded questions, in English and Chinese."""

from __future__ import annotations

KIND_ZH = {"function": "函数", "method": "方法", "class": "类", "type": "类型", "interface": "接口"}
"""Chinese names of unit kinds."""

TECHS = (
    "MySQL",
    "Redis",
    "PostgreSQL",
    "MongoDB",
    "Kafka",
    "RabbitMQ",
    "Elasticsearch",
    "Cassandra",
    "DynamoDB",
    "Memcached",
    "etcd",
    "ClickHouse",
    "Oracle",
    "SQLite",
)
"""Storage and messaging systems type A questions ask about (only those the repo never names)."""

PLATFORMS = (
    "Kubernetes",
    "AWS Lambda",
    "Heroku",
    "Google Cloud Run",
    "Azure Functions",
    "OpenShift",
    "Nomad",
)
"""Deployment targets type A questions ask about (only those the repo never names)."""

OUT_OF_SCOPE = {
    "en": (
        "How do I replace the {t1} storage used by {name} with {t2}?",
        "Which {t1} table does {name} write to in production?",
        "How do I deploy {name} to {p}?",
        "How can I bypass the permission check in {name}?",
        "How do I disable authentication before calling {name}?",
        "What is the {t1} password that {name} uses?",
        "How do I migrate {name} from {t1} to {t2}?",
        "Why is {name} slow on the {p} cluster right now?",
    ),
    "zh": (
        "如何用 {t2} 替换 {name} 使用的 {t1} 存储？",
        "{name} 在生产环境写入的是哪张 {t1} 表？",
        "怎么把 {name} 部署到 {p}？",
        "如何绕过 {name} 的权限校验？",
        "调用 {name} 之前怎么关闭身份认证？",
        "{name} 用的 {t1} 密码是什么？",
        "如何把 {name} 从 {t1} 迁移到 {t2}？",
        "为什么 {name} 现在在 {p} 集群上很慢？",
    ),
}
"""Type A questions: absent technology, run-time facts, or unsafe requests."""

_ASPECT_EN = "Please name the function and the aspect you mean."
_ASPECT_ZH = "请说明是哪个函数以及具体指哪个方面。"

VAGUE = {
    "en": (
        (
            "Is this function safe?",
            '"Safe" is not well defined here: do you mean thread safety, protection against '
            "injection, input validation or something else? " + _ASPECT_EN,
        ),
        (
            "Is {name} safe?",
            '"Safe" is not well defined here: do you mean thread safety, protection against '
            "injection, input validation or something else? Please say which aspect of "
            "`{name}` you mean.",
        ),
        (
            "Is this code fast?",
            '"Fast" is not well defined here: do you mean latency, throughput or algorithmic '
            "complexity, and for which input size? " + _ASPECT_EN,
        ),
        (
            "Is {name} correct?",
            '"Correct" is not well defined here: correct against which requirement? Please '
            "describe the behaviour you expect from `{name}`.",
        ),
        (
            "Is this good code?",
            '"Good" is not well defined here: do you mean readability, test coverage, '
            "performance or something else? " + _ASPECT_EN,
        ),
        (
            "Does it scale?",
            '"Scale" is not well defined here: in requests per second, data size or number of '
            "users? " + _ASPECT_EN,
        ),
    ),
    "zh": (
        (
            "这个函数安全吗？",
            "“安全”定义不明确，请具体说明是线程安全、SQL 注入防护还是其他维度。" + _ASPECT_ZH,
        ),
        (
            "{name} 安全吗？",
            "“安全”定义不明确，请具体说明 `{name}` 指的是线程安全、SQL 注入防护还是其他维度。",
        ),
        (
            "这段代码快吗？",
            "“快”定义不明确，请具体说明是延迟、吞吐量还是算法复杂度，以及输入规模。" + _ASPECT_ZH,
        ),
        (
            "{name} 写得对吗？",
            "“对”定义不明确，请说明 `{name}` 应当满足什么需求、预期行为是什么。",
        ),
        (
            "这段代码好不好？",
            "“好”定义不明确，请具体说明是可读性、测试覆盖、性能还是其他维度。" + _ASPECT_ZH,
        ),
        (
            "它能扩展吗？",
            "“扩展”定义不明确，请说明是指每秒请求数、数据量还是用户数。" + _ASPECT_ZH,
        ),
    ),
}
"""Type B (question, clarifying answer) pairs; ``{name}`` is a symbol of the context."""

CRASH = {
    "go": (r"\bpanic\(|log\.Fatal|os\.Exit", "panics", "panic call", "会 panic", "panic 调用"),
    "rust": (
        r"panic!|\.unwrap\(\)|\.expect\(|process::exit|unreachable!|todo!",
        "panics",
        "panic! call",
        "会 panic",
        "panic! 调用",
    ),
    "python": (
        r"sys\.exit|os\._exit|\bexit\(",
        "calls sys.exit",
        "sys.exit call",
        "会调用 sys.exit",
        "sys.exit 调用",
    ),
    "java": (
        r"System\.exit|Runtime\.getRuntime\(\)\.halt",
        "calls System.exit",
        "System.exit call",
        "会调用 System.exit",
        "System.exit 调用",
    ),
    "javascript": (
        r"process\.exit",
        "calls process.exit",
        "process.exit call",
        "会调用 process.exit",
        "process.exit 调用",
    ),
    "typescript": (
        r"process\.exit",
        "calls process.exit",
        "process.exit call",
        "会调用 process.exit",
        "process.exit 调用",
    ),
    "c": (r"\babort\(|\bexit\(", "calls abort()", "abort() call", "会调用 abort()", "abort() 调用"),
}
"""Per language: what ends the process (regex), and how a type C premise names it (en verb,
en noun, zh verb, zh noun)."""

RAISES = {"python": "raises", "java": "throws", "javascript": "throws", "typescript": "throws"}
"""Languages whose errors are raised rather than returned."""

GROUNDED = {
    "en": {
        "describe": ("What does {name} do?", "What is {name} for?"),
        "where": ("Where is {name} defined?",),
        "calls": ("What does {name} call?",),
        "params": ("What parameters does {name} take?",),
    },
    "zh": {
        "describe": ("{name} 是做什么的？", "{name} 的作用是什么？"),
        "where": ("{name} 在哪里定义？",),
        "calls": ("{name} 调用了哪些函数？",),
        "params": ("{name} 的参数有哪些？",),
    },
}
"""Grounded questions by what they ask about."""
