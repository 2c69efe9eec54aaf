/**
 * JupyterLab mime renderers for luminal_lab: its compiler stages (`application/vnd.luminal-lab.stage+json`: a
 * single stage or a whole pipeline) and its pictures (`application/vnd.luminal-lab.picture+json`, beside the
 * picture's `image/svg+xml`).
 */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { isPipeline, MIME_TYPE, parseEnvelope } from './model.js';
import { parsePicture, PICTURE_MIME, PictureView } from './picture.js';
import { errorBox, PipelineView, StageView } from './view.js';

export { MIME_TYPE, PICTURE_MIME };

/** Renders one stage envelope or a pipeline envelope; an invalid one as an error box. */
export class StageWidget extends Widget implements IRenderMime.IRenderer {
  private view: StageView | PipelineView | null = null;

  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this.addClass('jp-LuminalRenderer');
    this.mimeType = options.mimeType;
  }

  private readonly mimeType: string;

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.clear();
    try {
      const parsed = parseEnvelope(model.data[this.mimeType]);
      if (!parsed.ok) {
        const raw = model.data[this.mimeType] as { stage?: unknown } | null;
        const stage = raw && typeof raw === 'object' && typeof raw.stage === 'string' ? raw.stage : '';
        this.node.appendChild(errorBox(parsed.error, stage));
        return Promise.resolve();
      }
      const envelope = parsed.envelope;
      const view = isPipeline(envelope) ? new PipelineView(envelope) : new StageView(envelope);
      this.view = view;
      this.node.appendChild(view.node);
      // drawing goes on after this returns (large stages over several frames); data-status says when done
      view.start().catch(error => this.fail(error));
    } catch (error) {
      this.fail(error);
    }
    return Promise.resolve();
  }

  private fail(error: unknown): void {
    this.clear();
    const message = error instanceof Error ? error.message : String(error);
    this.node.appendChild(errorBox(`the renderer failed: ${message}`));
    console.error('luminal-lab renderer:', error);
  }

  private clear(): void {
    if (this.view) {
      this.view.dispose();
      this.view = null;
    }
    this.node.textContent = '';
  }

  protected onAfterShow(): void {
    this.notifyShown();
  }

  protected onAfterAttach(): void {
    this.notifyShown();
  }

  protected onResize(): void {
    this.notifyShown();
  }

  private notifyShown(): void {
    const view = this.view;
    if (view instanceof StageView) {
      view.onShow();
    } else if (view instanceof PipelineView) {
      view.views.forEach(v => v.onShow());
    }
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this.clear();
    super.dispose();
  }
}

/** Renders a picture to pan, zoom and fit; one whose data or SVG is not valid as an error box. */
export class PictureWidget extends Widget implements IRenderMime.IRenderer {
  private view: PictureView | null = null;

  constructor() {
    super();
    this.addClass('jp-LuminalRenderer');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.view = null;
    this.node.textContent = '';
    const parsed = parsePicture(model.data[PICTURE_MIME]);
    const svg = model.data['image/svg+xml'];
    try {
      if (!parsed.ok) {
        throw new Error(parsed.error);
      }
      if (typeof svg !== 'string') {
        throw new Error(`the ${parsed.picture.what} picture has no image/svg+xml beside it`);
      }
      this.view = new PictureView(parsed.picture, svg);
      this.node.appendChild(this.view.node);
      this.view.onShow();
    } catch (error) {
      this.node.appendChild(errorBox(error instanceof Error ? error.message : String(error), 'picture'));
    }
    return Promise.resolve();
  }

  protected onAfterShow(): void {
    this.view?.onShow();
  }

  protected onAfterAttach(): void {
    this.view?.onShow();
  }

  protected onResize(): void {
    this.view?.onShow();
  }
}

export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [MIME_TYPE],
  createRenderer: options => new StageWidget(options)
};

export const pictureRendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [PICTURE_MIME],
  createRenderer: () => new PictureWidget()
};

const extensions: IRenderMime.IExtension[] = [
  { id: 'luminal-lab:stage-renderer', rendererFactory, rank: 0, dataType: 'json' },
  { id: 'luminal-lab:picture-renderer', rendererFactory: pictureRendererFactory, rank: 0, dataType: 'json' }
];

export default extensions;
