/**
 * @jest-environment jsdom
 */
import { JOB_MIME, WIDGET_MIME, liveModelId } from '../liveModel';
import { MIME_TYPE } from '../model';

describe('liveModelId', () => {
  it('reads the model from our payload, which holds no widget view', () => {
    expect(liveModelId({ [JOB_MIME]: { model_id: 'm1' } }, JOB_MIME)).toBe(
      'm1'
    );
    expect(
      liveModelId(
        { [MIME_TYPE]: { state: 'running', model_id: 'g1' } },
        MIME_TYPE
      )
    ).toBe('g1');
  });

  it("reads an older output's saved widget view", () => {
    expect(
      liveModelId(
        { [JOB_MIME]: { version: 1 }, [WIDGET_MIME]: { model_id: 'old' } },
        JOB_MIME
      )
    ).toBe('old');
  });

  it('has none for a finished result or a bad payload', () => {
    expect(liveModelId({ [MIME_TYPE]: { state: 'finished' } }, MIME_TYPE)).toBe(
      null
    );
    expect(liveModelId({ [JOB_MIME]: { model_id: 7 } }, JOB_MIME)).toBe(null);
  });
});
