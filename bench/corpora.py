"""The tokenizer corpora: English prose, Python, JSON, Chinese and an agent transcript.

Nothing is downloaded. English is Python's own reference documentation (``pydoc_data``),
Python is the standard library's source, JSON is generated here (tool schemas of the
product and API-like records), Chinese is the text below (written for this benchmark),
and the transcript is a session's messages as the estimator counts them.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from pseudoclaude_nb.context.estimate import message_bytes
from pseudoclaude_nb.messages import Message

from .workload import Workload, english_prose, stdlib_sources

CHINESE = """\
上下文窗口是编码智能体最稀缺的资源。模型每一次请求都要带上完整的消息历史，而历史只会越来越长：读过的文件、执行过的命令、测试的输出、用户的每一句补充说明，都会留在对话里。窗口一旦被填满，请求就会失败；即使没有失败，过长的上下文也会让模型注意力分散，把早先的猜测当成已经确认的事实。

所以一个认真的宿主程序必须回答三个问题。第一，现在的上下文到底有多大？第二，什么时候应该开始压缩？第三，压缩之后，模型还能不能找回被替换掉的细节？这三个问题分别对应估算、分层压缩和历史检索。

先说估算。没有离线分词器的时候，常见的做法是用字节数除以三点五。这个规则对英文和代码偏高，对中文偏低：一个汉字在 UTF-8 里占三个字节，而分词器往往把常用汉字编成一个词元，有时两个。也就是说，同样是一千个字节，中文可能对应三百多个词元，英文却只有两百多个。如果只用固定比例，中文会话会在不知不觉中超出预算。

更好的办法是让每次响应里的用量数字来校准。服务端在每次响应后都会报告输入和输出的词元数。两次相邻的报告之间，新增加的消息是确定的，它们的字节数也是确定的，于是新增词元数除以新增字节数，就得到这个会话实际的比例。比例随着会话推进不断修正，但在证据不足的时候，仍然退回到默认值，宁可高估，也不要低估。

再说分层压缩。第一层处理单个过大的工具结果：超过五万字节的输出直接写到文件里，对话里只留下一段预览和文件路径，告诉模型需要时再用读取工具分段查看。这样做几乎没有信息损失，因为完整内容仍在磁盘上。第二层才是真正的摘要：当估算接近窗口上限时，把较早的历史交给模型写成结构化的摘要，只保留最近的一段原文。摘要必须区分已经确认的需求、尚未验证的推断、悬而未决的问题和下一步计划，否则一次随意的猜测会在几十轮之后变成不可动摇的前提。

摘要有代价。它会破坏提示缓存：被替换的前缀无法再命中缓存，下一次请求要重新写入。它也会丢失细节：错误信息的原文、文件的具体行号、某个参数的确切取值。因此宿主在摘要后面追加一句提醒，告诉模型摘要不是原文，需要细节时请重新读取文件。

还有另一种策略，叫做换窗。模型在预算快用完时，主动写一份交接说明，列出确认过的需求、自己的推断、未解决的冲突和相关文件，然后宿主打开一个全新的窗口，只带着最初的请求和这份交接继续工作。旧窗口的内容并没有消失，它们都保存在会话日志里，并建立了全文索引，新窗口里的模型可以用检索工具按需查找。

会话日志本身也值得仔细设计。每条消息追加一行 JSON，每次追加只做一次写入和一次刷盘，崩溃时最多损失最后半行。替换操作写一个标记，后面紧跟完整的新状态，加载时只有在新状态全部到齐之后才生效，所以任何时刻崩溃，读出来的要么是旧状态，要么是新状态，不会出现一半。日志很长的时候，恢复会话不需要从头重放，只要从文件末尾往回找到最后一次完整的替换，从那里开始读即可。

测试同样重要。离线的脚本化模型按照预先写好的回合作答，工具却是真实执行的：真的写文件，真的运行命令，真的产生几十万字节的日志。这样既能在没有密钥的机器上重复运行，又能覆盖压缩、换窗和恢复的每一条路径。对于崩溃，我们把一份真实日志在每一个字节处截断，逐一加载，检查得到的状态是否正好是截断之前最后一条完整记录所对应的状态。

最后是可见性。上下文管理如果只发生在后台，用户就无从判断模型为什么忽然忘记了某件事。笔记本里的仪表盘实时显示当前估算、压缩阈值、已经溢出到磁盘的结果数量和缓存命中情况；时间线按顺序列出每一条消息、每一次用量报告和每一个替换标记；点击任何一项都能看到原始内容。看得见，才能信得过。

关于提供方的适配，原则很简单：核心只认识一种中立的消息格式，每个提供方只负责把它翻译成自己的线上协议。有的协议把连续的工具结果合并成同一个用户回合，有的协议为每个结果单独发送一条工具消息；有的在流的开头报告输入词元，有的在最后一个数据块里才给出用量。这些差异都应该关在各自的文件里，不能渗进回合循环。回合循环只关心几件事：请求是否合法，每个工具调用是否恰好有一个结果，流是否正常结束，以及停止的原因是什么。

请求在发出之前要经过同一个校验器。校验器检查工具调用和结果是否一一配对：没有结果的调用不能发出去，没有调用的结果也不能发出去。在测试里，任何违规都直接抛出异常，因为它意味着上游有缺陷；在生产环境里，校验器修复对话、记录一条说明，然后继续运行，绝不把一个注定被拒绝的请求交给服务端。被修复的对话同样会写进日志，这样日志和内存里的状态始终一致。

流式响应会在任何地方被切断。网络抖动、服务过载、用户按下中断键，都可能让一次响应停在半途。宿主的规则是：已经收到的文字可以保留，并注明被中断；只收到一半的工具调用绝不能进入对话，因为它的参数可能不完整，执行它会产生不可预知的后果。对于已经开始执行却被中断的工具，宿主补上一条错误结果，说明它的效果未知，请模型自行核实。

记忆是另一条时间线。会话结束以后，大部分细节都应该随之消失，但有少数事实值得长期保存：用户偏好的包管理器，项目约定的代码风格，某个接口只能在测试环境里调用。这些事实写成带有元数据的小文件，每个文件记录名称、描述、类型、来源和更新时间；一个索引文件列出所有条目，只有索引会进入系统提示，正文在需要时才读取。索引有长度上限，超出的部分会被截断，并注明还有多少条没有显示。

记忆也会过时。三个月前记下的目录结构，今天可能已经完全不同；上周确认的接口地址，昨天可能刚刚迁移。因此每条记忆在提示里都带着它的年龄，前面还有一句提醒：记忆可能已经过时，使用之前请对照工作区核实。用户可以把某条记忆标记为已验证或已过时，也可以随时关闭记忆，关闭之后请求里既没有索引也没有正文，请求清单可以证明这一点。

性能问题往往在规模变大之后才暴露。十条消息的时候，每一步都重新估算整个对话也无所谓；一万条消息的时候，同样的做法会让每一步都变慢。正确的做法是让每一步的开销只和新增内容有关：以最近一次用量报告为锚点，只估算锚点之后追加的消息。日志写入也是如此，每次追加只写新的一行，替换时一次写入、一次刷盘，而不是为快照里的每一条消息各刷一次盘。

历史检索要在一千兆字节的记录里，五十毫秒之内给出结果。全文索引使用三元组分词，这样中文和代码片段都能按子串匹配。索引是派生数据，随时可以从日志重建；索引损坏或丢失，只会导致一次重建，绝不会让正在进行的任务失败。检索结果按时间倒序返回，每条都带着会话编号和消息编号，模型可以据此精确引用，而不是凭印象复述。

基准测试本身也要可信。每个数字都以比值的形式给出，分子和分母在同一台机器、同一次运行里测得，这样换一台机器，结论依然成立。绝对时间也一并记录，方便读者判断量级。达不到目标的地方，报告要写明差了多少、原因是什么，而不是悄悄调低标准。对于无法在时间预算内直接测量的规模，就测量几个较小的规模，再做线性外推，并在报告里明确标注这是外推的结果。

最后，文档要和代码一起演进。每一个魔法命令的帮助文本就是它的文档字符串；每一个错误信息都告诉用户下一步该做什么，比如设置哪个环境变量，或者运行哪条命令。新手第一次运行的演示不需要任何密钥，它用脚本化的模型完成一个真实的小任务：写一个模块和一个会失败的测试，生成一份很大的日志并触发溢出，修好缺陷，再把测试跑通。看完这个演示，用户就知道整个系统是怎样运转的。

在真实项目里，这些机制要一起工作。用户在周一开始一个重构任务，智能体读了二十个文件，跑了十几次测试，中间因为一个很大的构建日志触发了第一层溢出；周二用户重新打开笔记本，恢复会话，日志已经有两百兆，但恢复只用了几毫秒，因为最后一次压缩就在文件末尾附近。智能体接着工作，在窗口快满时写好交接说明，切换到新窗口，又用检索工具找回了周一那条关键的错误信息。整个过程中，用户随时可以打开时间线，看清楚每一步发生了什么、为什么发生、花了多少词元。
"""


def _take(text: str, limit: int) -> str:
    """The first ``limit`` bytes of ``text``, cut at a line end."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    cut = data[:limit].decode("utf-8", errors="ignore")
    return cut[: cut.rfind("\n") + 1] or cut


def english(limit: int) -> str:
    return _take(english_prose(), limit)


def python(limit: int) -> str:
    return _take("\n\n".join(text for _path, text in stdlib_sources()), limit)


def json_corpus(limit: int, seed: int = 5) -> str:
    from pseudoclaude_nb.tools import build_tools

    rng = random.Random(seed)
    parts = [json.dumps(build_tools(Path.cwd()).schemas(), indent=2)]
    words = english_prose().split()
    while sum(len(p) for p in parts) < limit:
        record = {
            "id": f"{rng.getrandbits(64):016x}",
            "type": rng.choice(["issue", "pull_request", "commit", "comment"]),
            "title": " ".join(rng.choices(words, k=rng.randrange(4, 12))),
            "number": rng.randrange(1, 99_999),
            "score": round(rng.random() * 100, 3),
            "labels": rng.sample(["bug", "docs", "perf", "ui", "core", "test", "good first issue"], 3),
            "created_at": f"2026-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}T12:{rng.randrange(60):02d}:00Z",
            "author": {"login": f"user{rng.randrange(1000)}", "site_admin": rng.random() < 0.1},
            "files": [
                {"path": p, "additions": rng.randrange(300)} for p, _t in rng.sample(stdlib_sources(), 2)
            ],
        }
        parts.append(json.dumps(record, indent=rng.choice([None, 2])))
    return _take("\n".join(parts), limit)


def chinese(limit: int) -> str:
    return _take(CHINESE, limit)


def transcript(limit: int, seed: int = 41) -> list[Message]:
    """A session's messages (text, tool calls, tool results) of about ``limit`` bytes."""
    work = Workload(seed, big_every=0)
    out, size = [], 0
    for m in work.messages(10**9):
        out.append(m)
        size += message_bytes(m)
        if size >= limit:
            break
    return out


def text_corpora(limit: int) -> dict[str, str]:
    return {
        "English prose": english(limit),
        "Python": python(limit),
        "JSON": json_corpus(limit),
        "Chinese": chinese(limit),
    }
