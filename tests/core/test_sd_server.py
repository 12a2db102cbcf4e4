"""sd-server as an engine kind: launch rules, argv, progress lines, and the OpenAI images mapping."""

from __future__ import annotations

import base64

import pytest

from stoker.engines.kind import EngineKind, failure_of_line
from stoker.engines.sd_server import (
    ImageRequestError,
    decode_png,
    distilled_steps,
    openai_to_txt2img,
    parse_sd_output,
    plan_image_launch,
    sd_launch_spec,
    split_sd_output,
    txt2img_to_openai,
)
from stoker.library.image_parts import ImageModel

SD15 = ImageModel("v1-5-pruned-emaonly", checkpoint="/m/v1-5-pruned-emaonly.safetensors")
SCHNELL = ImageModel("flux1-schnell-q4_0", diffusion_model="/m/flux1-schnell-q4_0.gguf", vae="/m/ae.safetensors",
                     clip_l="/m/clip_l.safetensors", t5xxl="/m/t5xxl_fp16.safetensors")


def test_distilled_models_get_their_steps():
    assert distilled_steps("Krea-2-Turbo") == 8
    assert distilled_steps("flux1-schnell-q4_0") == 4
    assert distilled_steps("sd_turbo") == 4 and distilled_steps("sdxl-turbo") == 4
    assert distilled_steps("sdxl_lightning_4step") == 4
    assert distilled_steps("v1-5-pruned-emaonly") is None


def test_checkpoint_argv_pinned_whole():
    spec = sd_launch_spec(plan_image_launch(SD15), binary="/e/sd-server", port=18200)
    assert spec.argv == ("/e/sd-server", "--model", "/m/v1-5-pruned-emaonly.safetensors", "--vae-tiling",
                         "--listen-ip", "127.0.0.1", "--listen-port", "18200")
    assert spec.host == "127.0.0.1" and spec.secret_env == ()


def test_diffusion_model_with_its_auxiliary_files_steps_and_cfg():
    spec = sd_launch_spec(plan_image_launch(SCHNELL, threads=4), binary="/e/sd-server", port=18201)
    assert spec.argv == ("/e/sd-server", "--diffusion-model", "/m/flux1-schnell-q4_0.gguf",
                         "--vae", "/m/ae.safetensors", "--clip_l", "/m/clip_l.safetensors",
                         "--t5xxl", "/m/t5xxl_fp16.safetensors", "--steps", "4", "--cfg-scale", "1", "--vae-tiling",
                         "--threads", "4", "--listen-ip", "127.0.0.1", "--listen-port", "18201")
    krea = plan_image_launch(ImageModel("krea-2-turbo", diffusion_model="/m/k.gguf", llm="/m/qwen.gguf"))
    argv = sd_launch_spec(krea, binary="/e/sd-server", port=18202).argv
    assert "--vae-tiling" not in argv and argv[argv.index("--steps") + 1] == "8" and "--llm" in argv
    with pytest.raises(ValueError):
        plan_image_launch(ImageModel("both", checkpoint="/a", diffusion_model="/b"))


def test_progress_bar_repaints_become_one_event_each():
    # util.cpp print_progress_line: \r, the bar, "N/M - X", ESC[K, newline only at the end.
    chunk = ("\r  |=========>                                        | 1/5 - 2.10s/it\x1b[K"
             "\r  |===================>                              | 2/5 - 2.05s/it\x1b[K"
             "\r  |==================================================| 5/5 - 1.98s/it\x1b[K\n")
    assert len(split_sd_output(chunk)) == 3
    events = parse_sd_output([chunk.rstrip("\n")])
    assert [(e.phase, e.done, e.total) for e in events] == [("rendering", 1, 5), ("rendering", 2, 5),
                                                             ("rendering", 5, 5)]
    assert events[0].seconds_per_step == 2.10 and events[-1].fraction == 1.0
    fast = parse_sd_output(["  |=====| 3/20 - 4.00it/s\x1b[K"])[0]
    assert fast.seconds_per_step == 0.25
    loading = parse_sd_output(["  |====>     | 64/76 - 243.54MB/s\x1b[K"])[0]
    assert loading.phase == "loading" and loading.done == 64
    assert parse_sd_output(["[INFO ] main.cpp:148  - listening on: 127.0.0.1:18777"])[0].phase == "ready"


def test_failure_lines_of_sd_server():
    assert failure_of_line(EngineKind.SD_SERVER, "[ERROR] main.cpp:97   - new_sd_ctx_t failed") == "bad-model"
    assert failure_of_line(EngineKind.SD_SERVER,
                           "[ERROR] common.cpp:286  - error: invalid parameter for argument: --help") == "bad-argument"


def test_openai_request_maps_onto_txt2img():
    plan = plan_image_launch(SCHNELL)
    call = openai_to_txt2img({"model": "flux1-schnell-q4_0", "prompt": "a red fox", "size": "64x64", "n": 2,
                              "response_format": "b64_json", "seed": 7}, plan)
    assert call.path == "/sdapi/v1/txt2img"
    assert call.body == {"prompt": "a red fox", "width": 64, "height": 64, "batch_size": 2, "steps": 4,
                         "cfg_scale": 1.0, "seed": 7}
    plain = openai_to_txt2img({"prompt": "a lighthouse"}, plan_image_launch(SD15))
    assert plain.body == {"prompt": "a lighthouse", "width": 512, "height": 512, "batch_size": 1}


@pytest.mark.parametrize("body, words", [
    ({"prompt": ""}, "prompt is required"),
    ({"prompt": "x", "response_format": "url"}, "b64_json"),
    ({"prompt": "x", "size": "big"}, "WIDTHxHEIGHT"),
    ({"prompt": "x", "size": "63x64"}, "multiple of 8"),
    ({"prompt": "x", "n": 0}, "n must be"),
    ({"prompt": "x", "steps": 0}, "steps must be"),
    ({"prompt": "x", "seed": "one"}, "seed must be"),
])
def test_bad_image_requests_get_one_sentence(body, words):
    with pytest.raises(ImageRequestError, match=words):
        openai_to_txt2img(body, plan_image_launch(SD15))


def test_txt2img_reply_maps_back_to_b64_json():
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
    b64 = base64.b64encode(png).decode()
    out = txt2img_to_openai({"images": [b64], "parameters": {}, "info": ""}, created=1700000000)
    assert out == {"created": 1700000000, "data": [{"b64_json": b64}], "output_format": "png"}
    assert decode_png(out["data"][0]["b64_json"]) == png
    with pytest.raises(ImageRequestError):
        txt2img_to_openai({"images": []})
    with pytest.raises(ValueError):
        decode_png(base64.b64encode(b"GIF89a").decode())


# --- which files make an image model, and which engine runs what --------------------------

from stoker.engines.sd_server import image_memory  # noqa: E402
from stoker.library.image_parts import ImageFile, ImagePart, image_models_from, image_part_of  # noqa: E402  # noqa: E402


@pytest.mark.parametrize("arch, names, part", [
    # sd.cpp's converted checkpoints and ComfyUI-GGUF (city96) files, by their tensor names
    ("sd1", ["model.diffusion_model.input_blocks.0.0.weight", "first_stage_model.decoder.conv_in.weight",
             "cond_stage_model.transformer.text_model.encoder.layers.0.mlp.fc1.weight"], ImagePart.CHECKPOINT),
    ("flux", ["double_blocks.0.img_attn.qkv.weight", "single_blocks.0.linear1.weight"], ImagePart.DIFFUSION),
    ("sd3", ["joint_blocks.0.x_block.attn.qkv.weight"], ImagePart.DIFFUSION),
    ("wan", ["blocks.0.self_attn.q.weight", "patch_embedding.weight"], ImagePart.DIFFUSION),
    ("flux", ["decoder.conv_in.weight", "encoder.conv_in.weight"], ImagePart.VAE),
    ("t5", ["shared.weight", "encoder.block.0.layer.0.SelfAttention.q.weight"], ImagePart.T5XXL),
    ("clip", [f"text_model.encoder.layers.{i}.mlp.fc1.weight" for i in range(12)], ImagePart.CLIP_L),
    ("clip", [f"text_model.encoder.layers.{i}.mlp.fc1.weight" for i in range(32)], ImagePart.CLIP_G),
    ("flux", ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight"], ImagePart.LLM),
    # llama.cpp models are never image parts, whatever else they hold
    ("qwen3", ["token_embd.weight", "blk.0.attn_q.weight"], None),
    ("llama", ["token_embd.weight", "blk.0.attn_q.weight", "output.weight"], None),
])
def test_tensor_names_say_which_part_of_an_image_model_a_file_is(arch, names, part):
    assert image_part_of(arch, names) is part


def test_an_image_model_takes_the_vae_and_encoders_of_its_own_folder():
    files = [ImageFile("/a/flux2-klein-dit.gguf", ImagePart.DIFFUSION), ImageFile("/a/flux2-vae.gguf", ImagePart.VAE),
             ImageFile("/a/qwen3-4b-encoder.gguf", ImagePart.LLM), ImageFile("/a/other-vae.gguf", ImagePart.VAE),
             ImageFile("/b/sd15.gguf", ImagePart.CHECKPOINT), ImageFile("/b/taesd.gguf", ImagePart.VAE),
             ImageFile("/c/lonely-vae.gguf", ImagePart.VAE)]
    klein, sd15 = image_models_from(files)
    assert klein == ImageModel("flux2-klein-dit", diffusion_model="/a/flux2-klein-dit.gguf",
                               vae="/a/flux2-vae.gguf", llm="/a/qwen3-4b-encoder.gguf")
    assert sd15 == ImageModel("sd15", checkpoint="/b/sd15.gguf")  # a checkpoint has its own VAE
    memory = image_memory(100 * 2 ** 20, 8 * 2 ** 30)
    assert memory.total_bytes == 100 * 2 ** 20 + 512 * 2 ** 20 and memory.name == "CPU"
    plan = plan_image_launch(klein, memory=memory)
    assert plan.devices == (memory,) and plan.summary_line("cpu") == "sd-server, 20 steps (the server's default), " \
                                                                      "CFG 1, VAE tiling, cpu"


def test_the_engine_kind_of_a_model_and_its_progress_in_words():
    from stoker.engines.kind import engine_kind_for, progress_text
    from stoker.library.model_ids import ModelKind, model_kind

    assert model_kind("flux", None, None, "diffusion") is ModelKind.IMAGE
    assert model_kind("flux", None, None, "vae") is ModelKind.CHAT  # a part, never served alone
    assert engine_kind_for(ModelKind.IMAGE, "flux") is EngineKind.SD_SERVER
    assert engine_kind_for(ModelKind.CHAT, "deepseek4") is EngineKind.DS4
    assert engine_kind_for(ModelKind.CHAT, "llama") is EngineKind.LLAMA_SERVER
    bar = "\r  |==>                 | 3/20 - 1.23s/it\x1b[K"
    assert progress_text(EngineKind.SD_SERVER, [bar]) == "rendering step 3 of 20 (1.23 s per step)"
    assert progress_text(EngineKind.SD_SERVER, ["listening on: 127.0.0.1:1234"]) is None
    assert progress_text(EngineKind.LLAMA_SERVER, [bar]) is None


def test_an_image_request_for_a_chat_model_and_a_chat_request_for_an_image_model_name_who_can():
    from stoker.gateway.rules import wrong_kind_message
    from stoker.library.model_ids import ModelKind

    assert wrong_kind_message("smollm2:q4_1", ModelKind.CHAT, "/v1/images/generations", ("flux-dit",)) == (
        "smollm2:q4_1 is a chat model and cannot serve /v1/images/generations; for images use flux-dit.")
    assert "add one (a diffusion model GGUF" in wrong_kind_message("smollm2:q4_1", ModelKind.CHAT,
                                                                    "/sdapi/v1/txt2img", ())
    assert wrong_kind_message("flux-dit", ModelKind.IMAGE, "/v1/chat/completions", ("smollm2:q4_1",)) == (
        "flux-dit is an image model and cannot serve /v1/chat/completions; for text generation use smollm2:q4_1.")
